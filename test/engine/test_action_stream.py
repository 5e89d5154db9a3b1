"""ActionStream: elapsed steps are skipped, switches are cross-faded (also one that comes
during a fade), the end is held."""

import threading

import numpy as np
import pytest

from oxygen_ros.engine.action_stream import MAX_FADES, ActionStream


def ramp(start, steps=10, dim=2):
    return np.stack([np.full(dim, start + i, dtype=float) for i in range(steps)])


def test_before_the_first_chunk_there_is_no_command():
    assert ActionStream().action_at(1.0) is None


def test_steps_that_elapsed_during_inference_are_skipped():
    stream = ActionStream(blend_s=0.0)
    # chunk computed from an observation at t=1.0, ready at t=1.3 (15 steps of 20 ms late)
    stream.push(ramp(0, steps=50), stamp=1.0, dt=0.02, now=1.3)
    command, exhausted = stream.action_at(1.3)
    np.testing.assert_allclose(command, [15.0, 15.0])
    assert not exhausted


def test_commands_interpolate_between_steps_for_any_control_rate():
    stream = ActionStream(blend_s=0.0)
    stream.push(ramp(0), stamp=0.0, dt=0.1, now=0.0)
    np.testing.assert_allclose(stream.action_at(0.25)[0], [2.5, 2.5])
    np.testing.assert_allclose(stream.action_at(0.0)[0], [0.0, 0.0])


def test_past_the_last_step_the_last_action_is_held_and_reported():
    stream = ActionStream(blend_s=0.0)
    stream.push(ramp(0), stamp=0.0, dt=0.1, now=0.0)
    command, exhausted = stream.action_at(5.0)
    np.testing.assert_allclose(command, [9.0, 9.0])
    assert exhausted


def test_a_new_chunk_is_cross_faded_in_without_a_jump():
    stream = ActionStream(blend_s=0.1)
    stream.push(np.zeros((50, 1)), stamp=0.0, dt=0.02, now=0.0)
    stream.push(np.ones((50, 1)), stamp=0.2, dt=0.02, now=0.3)
    times = np.arange(0.3, 0.45, 0.02)
    commands = [float(stream.action_at(t)[0][0]) for t in times]
    assert commands[0] == 0.0 and commands[-1] == 1.0
    steps = np.diff(commands)
    assert (steps >= 0).all() and steps.max() <= 0.2 + 1e-9  # a ramp, not a jump of 1.0


def test_a_chunk_that_comes_while_the_last_one_fades_in_fades_from_what_was_commanded():
    stream = ActionStream(blend_s=0.1)
    stream.push(np.zeros((50, 1)), stamp=0.0, dt=0.02, now=0.0)
    stream.push(np.ones((50, 1)), stamp=0.2, dt=0.02, now=0.3)
    before = float(stream.action_at(0.35)[0][0])           # halfway: 0.5
    stream.push(np.full((50, 1), 2.0), stamp=0.3, dt=0.02, now=0.35)
    after = [float(stream.action_at(t)[0][0]) for t in np.arange(0.35, 0.5, 0.01)]
    assert before == pytest.approx(0.5) and after[0] == pytest.approx(before)   # no jump
    assert all(b >= a - 1e-12 for a, b in zip(after, after[1:])) and after[-1] == 2.0
    # plans whose fade-in is over are let go: the chain stays as long as the fades that run
    for k in range(100):
        stream.push(np.full((50, 1), float(k)), stamp=0.5 + k, dt=0.02, now=0.5 + k)
    assert stream.plan.previous is not None and stream.plan.previous.previous is None
    for k in range(5000):     # the clock stands still (a paused /clock): a bounded chain
        stream.push(np.zeros((50, 1)), stamp=200.0, dt=0.02, now=200.0)
    depth, plan = 0, stream.plan
    while plan is not None:
        depth, plan = depth + 1, plan.previous
    assert depth == MAX_FADES and stream.action_at(200.05) is not None


def test_plans_are_immutable_and_swapped_whole():
    stream = ActionStream()
    actions = ramp(0)
    stream.push(actions, stamp=0.0, dt=0.1, now=0.0)
    actions[:] = -1.0                      # the caller's array is not shared
    assert stream.plan.actions[3, 0] == 3.0
    assert not stream.plan.actions.flags.writeable


def test_reading_while_a_writer_swaps_plans_never_sees_a_half_plan():
    stream = ActionStream(blend_s=0.0)
    stop = threading.Event()
    seen = []

    def writer():
        value = 0
        while not stop.is_set():
            value += 1
            stream.push(np.full((5, 3), float(value)), stamp=0.0, dt=0.1, now=0.0)

    thread = threading.Thread(target=writer)
    thread.start()
    for _ in range(2000):
        result = stream.action_at(0.2)
        if result is not None:
            seen.append(result[0])
    stop.set()
    thread.join()
    assert seen and all(len(set(command.tolist())) == 1 for command in seen)
