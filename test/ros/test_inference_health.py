"""The inference node's diagnostics verdict without ROS: which state wins, a problem
warns only in the period it was counted in, and what the diagnostics read is read safely
while the engine thread and callbacks change it."""

import itertools
import sys
import threading
from collections import Counter

import numpy as np
import pytest

from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.observation import Observation
from oxygen_ros.engine.oxygen import OxygenEngine
from oxygen_ros.ros.inference_health import Health, engine_values, robot_values, stuck_frame

FINE = dict(engine_running=True, control_running=True, active=True, stale=False, targets_missed=None,
            deadline_misses=0)


def verdict(health, counters=None, **state):
    return health.verdict(**(FINE | state), counters=Counter(counters or {}))


def test_states_in_order_of_precedence():
    assert verdict(Health(), engine_running=False, active=False, stale=True) == (
        "ERROR", "engine thread stopped")
    assert verdict(Health(), control_running=False, active=False) == (
        "ERROR", "control process stopped: no commands")
    assert verdict(Health(), control_silent_s=2.04, active=False) == (
        "ERROR", "control process silent for 2.0 s: its commands are unknown")
    assert verdict(Health(), active=False, stale=True) == ("OK", "inactive: no commands")
    assert verdict(Health(), stale=True, targets_missed="x") == (
        "ERROR", "no fresh observations: actions stopped")
    assert verdict(Health(), targets_missed="frames 0.9 s", deadline_misses=3) == (
        "WARN", "real-time targets cannot be met: frames 0.9 s")
    assert verdict(Health()) == ("OK", "ok")


def test_new_problems_warn_once_then_ok():
    health = Health()
    assert verdict(health, {"bad_image": 2}, deadline_misses=1) == (
        "WARN", "2 bad_image, 1 deadline_misses")
    assert verdict(health, {"bad_image": 2}, deadline_misses=1) == ("OK", "ok")
    assert verdict(health, {"bad_image": 3, "dialogue_kv_full": 1}, deadline_misses=1) == (
        "WARN", "1 bad_image, 1 dialogue_kv_full")


def test_a_robot_without_fresh_observations_names_the_bad_input_that_dropped_them():
    """Observations dropped for a joint the robot does not publish: the ERROR says so, not
    only "no fresh observations" (camera_ingest, publishing them, reports ok)."""
    health = Health()
    assert verdict(health, {"joint_names_mismatch": 63}, stale=True) == (
        "ERROR", "no fresh observations: actions stopped (63 joint_names_mismatch in this "
                 "period)")
    assert verdict(health, {"joint_names_mismatch": 63}, stale=True) == (
        "ERROR", "no fresh observations: actions stopped")      # none came in this period
    assert verdict(health, {"joint_names_mismatch": 65}, deadline_misses=1, stale=True) == (
        "ERROR", "no fresh observations: actions stopped (1 deadline_misses, 2 "
                 "joint_names_mismatch in this period)")


def test_failed_frames_are_an_error_with_the_error_text_in_the_period_they_failed_in():
    health = Health()
    for _ in range(3):
        health.frame_failed(RuntimeError("probability tensor contains nan"))
    expected = ("ERROR", "3 engine frames failed: RuntimeError: probability tensor contains nan")
    assert verdict(health, active=False) == expected          # inactive does not hide it
    assert health.values() == {"failed_frames": 3,
                               "last_engine_error": "RuntimeError: probability tensor contains nan"}
    assert verdict(health) == ("OK", "ok")                    # the failures stopped
    health.frame_failed(ValueError("x"))
    assert verdict(health, {"bad_image": 1}, stale=True) == (
        "ERROR", "1 engine frames failed: ValueError: x")


def test_a_frame_that_runs_past_a_plan_and_four_of_the_longest_recent_ones_is_stuck():
    """A frame that hangs rather than raises: no chunk comes and the commands repeat the plan's
    last step. Stuck once it has run longer than a whole plan and 4 times the longest of the
    recent frames (a slow machine's frames are long, but alike), an ERROR after failures."""
    recent = (0.08, 0.12, 0.1)
    assert stuck_frame(None, recent, 1.0) is None                 # between frames
    assert stuck_frame(0.9, recent, 1.0) is None                  # within a plan
    assert stuck_frame(1.5, recent, 1.0) == (
        "an engine frame has run for 1.5 s (the longest of the last 3 took 0.12 s): no new "
        "chunk meanwhile, the commands repeat the last step of the plan in force")
    slow = (2.4, 2.6, 2.5)                                        # back to back, 2.5 s each
    assert stuck_frame(5.0, slow, 1.0) is None and stuck_frame(10.5, slow, 1.0) is not None
    assert stuck_frame(1.5, (), 1.0) is not None                  # no frame has ended yet
    stuck = stuck_frame(1.5, recent, 1.0)
    assert verdict(Health(), stuck=stuck, targets_missed="x", active=False) == ("ERROR", stuck)
    health = Health()
    health.frame_failed(ValueError("x"))
    assert verdict(health, stuck=stuck) == ("ERROR", "1 engine frames failed: ValueError: x")


def test_counters_that_are_not_problems_do_not_warn():
    assert verdict(Health(), {"commands": 500, "held_commands": 3, "observations": 9}) == (
        "OK", "ok")


def test_longest_gap_counts_intervals_that_end_inside_the_window():
    from oxygen_ros.ros.inference_health import longest_gap
    times = [0.0, 0.02, 0.30, 1.02, 1.04, 1.10]
    assert longest_gap(times, since=1.0) == pytest.approx(0.72)     # 0.30 -> 1.02
    assert longest_gap(times, since=1.03) == pytest.approx(0.06)
    assert longest_gap(times, since=2.0) == 0.0
    assert longest_gap([5.0], since=0.0) == 0.0


def test_the_diagnostics_read_safely_while_other_threads_change_what_they_read(tiny_model):
    engine = OxygenEngine(tiny_model, EngineConfig(camera_names=("base",), memory_period_s=0))
    for _ in range(20):
        engine.submit_dialogue("hi")
    engine.drain()                           # 20 requests waiting for a first observation
    counters, stop = Counter(), threading.Event()

    def change():       # as the engine thread (attach, preempt) and the callbacks (new keys)
        waiting = engine.scheduler.waiting
        for i in itertools.count():
            if stop.is_set():
                return
            waiting.appendleft(waiting.pop())
            key = f"kind {i % 64}"
            if key in counters:
                del counters[key]
            else:
                counters[key] = 1

    errors = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)              # switch threads as often as CPython will
    changer = threading.Thread(target=change)
    changer.start()
    try:
        for _ in range(3000):
            try:
                engine_values(engine)
                robot_values(engine, "")
                Health().verdict(**FINE, counters=counters)
            except RuntimeError as error:    # "deque mutated during iteration", ...
                errors.append(repr(error))
    finally:
        stop.set()
        changer.join()
        sys.setswitchinterval(interval)
    assert errors == []
    assert robot_values(engine, "")["waiting_for_observation"] == 20
    assert robot_values(engine, "")["pending_requests"] == 20


def test_the_kv_bytes_of_each_owner_are_always_reported(tiny_model):
    engine = OxygenEngine(tiny_model, EngineConfig(camera_names=("base",), memory_period_s=0))
    owners = ("kv_bytes_prefix", "kv_bytes_dialogue", "kv_bytes_memory")
    assert {key: engine_values(engine)[key] for key in owners} == dict.fromkeys(owners, 0)
    image = np.zeros((28, 28, 3), np.uint8)
    engine.step(Observation({"base": image}, np.zeros(6), "look", 0.0))   # its prefix stays
    values = engine_values(engine)
    assert values["kv_bytes_prefix"] > 0
    assert values["kv_bytes_dialogue"] == values["kv_bytes_memory"] == 0
