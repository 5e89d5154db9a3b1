"""One engine, several robots, on the manual clock with injected costs: frames go earliest
deadline first and batch the robots due together; each robot's chunks continue its own plan;
language decodes across robots in one batch and answers each robot about its own frames;
one robot's burst of requests does not crowd out another's; a robot the measured capacity
cannot serve is refused with the numbers, and one the machine can no longer serve at run
time is shed and later served again."""

import dataclasses

import numpy as np
import pytest
import torch
from engine_helpers import Events, TimedModel, config, stream

from oxygen_ros.engine.clock import ManualClock
from oxygen_ros.engine.frame_loop import FrameLoop
from oxygen_ros.engine.frame_timing import FrameTiming
from oxygen_ros.engine.admission import READMIT_AFTER, SHED_AFTER
from oxygen_ros.engine.oxygen import OxygenEngine
from oxygen_ros.engine.pool_size import request_tokens
from oxygen_ros.engine.request import LanguageRequest, Status, sampling_generator
from oxygen_ros.engine.scheduler import Scheduler
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.tokenizer import ByteTokenizer

PERIOD = 0.2


def fleet(tiny_model, robots, actions=lambda batch: 0.02 + 0.005 * (batch - 1), **overrides):
    clock = ManualClock()
    # the robots' batched prefill costs what theirs alone would (the batch saves nothing)
    model = TimedModel(tiny_model, clock, prefill=lambda batch: 0.01 * batch, actions=actions,
                       extend=0.002, decode=lambda batch: 0.004 + 0.001 * batch)
    settings = dict(frame_period_s=PERIOD, memory_period_s=0.0, language_floor=0.25) | overrides
    engine = OxygenEngine(model, config(**settings), clock=clock, robots=robots)
    return engine, clock, model


def observations(robot, seed, offset=0.0, count=200, period=1 / 30):
    return [dataclasses.replace(o, robot=robot, stamp=offset + i * period)
            for i, o in enumerate(stream(count, seed=seed, period=period))]


def drive(engine, clock, feeds, duration, questions=(), stale_s=0.25, loop=None):
    """Run the FrameLoop (`loop`, else a new one) over each robot's camera stream (robot ->
    observations, each available from its stamp on, none once the newest is stale_s old:
    the node's watchdog) for `duration` seconds; returns the robots of each frame."""
    frames = []
    serve = engine.serve

    def recorded(observations, frame_start=None):
        frames.append([o.robot for o in observations])
        return serve(observations, frame_start)
    engine.serve = recorded
    loop = loop or FrameLoop(engine)
    start, pending = clock.now(), sorted(questions)
    while clock.now() < start + duration:
        now = clock.now() - start
        while pending and pending[0][0] <= now:
            _, robot, text = pending.pop(0)
            engine.submit_dialogue(text, robot=robot)
        newest = {}
        for robot, observations in feeds.items():
            seen = [o for o in observations if o.stamp <= now]
            fresh = seen and now - seen[-1].stamp <= stale_s
            newest[robot] = dataclasses.replace(seen[-1], stamp=start + seen[-1].stamp) \
                if fresh else None
        clock.advance(loop.run_robots(newest))
    engine.serve = serve
    return frames


def test_frames_go_earliest_deadline_first_and_due_robots_share_one_pass(tiny_model):
    engine, clock, model = fleet(tiny_model, ["a", "b", "c"])
    events = Events(engine)
    # b's camera starts 0.07 s late: its deadlines stay 0.07 s behind a's and c's, more
    # than one action path; c's starts 5 ms late: within one action path of a's
    feeds = {"a": observations("a", 0), "b": observations("b", 1, offset=0.07),
             "c": observations("c", 2, offset=0.005)}
    prefills = model.calls["prefill"]
    frames = drive(engine, clock, feeds, duration=2.0)
    assert model.calls["prefill"] - prefills == len(frames)   # one batched prefill a frame
    assert frames[:3] == [["a"], ["c"], ["b"]], frames     # each first frame at once
    # then c joins a's frames (a's deadline first), b keeps its own
    steady = frames[3:]
    assert steady[:4] == [["a", "c"], ["b"], ["a", "c"], ["b"]], frames
    assert steady.count(["a", "c"]) >= 8 and steady.count(["b"]) >= 8, frames
    assert all(f in (["a", "c"], ["b"]) for f in steady), frames
    # every robot's plan stays fed; each chunk is labelled with its robot
    assert engine.counters["deadline_misses"] == 0
    per_robot = {r: [c for c in events.chunks if c.robot == r] for r in "abc"}
    assert all(len(chunks) >= 8 for chunks in per_robot.values())
    for chunks in per_robot.values():
        gaps = np.diff([c.stamp for c in chunks])
        assert gaps.max() <= PERIOD + 1 / 30 + 1e-9, gaps


def test_each_robots_chunks_continue_its_own_plan():
    # π0.5's 10 denoising steps (the tiny preset's 3 pull the frozen steps only loosely)
    model = Pi05Model(preset("tiny").with_(num_denoise_steps=10), seed=0).eval()
    engine, clock, _ = fleet(model, ["a", "b"])
    events = Events(engine)
    drive(engine, clock, {"a": observations("a", 0), "b": observations("b", 5)},
          duration=1.0)
    dt = engine.config.action_dt_s
    own_gaps, cross_gaps = [], []
    for robot, other in (("a", "b"), ("b", "a")):
        mine = [c for c in events.chunks if c.robot == robot]
        theirs = [c for c in events.chunks if c.robot == other]
        for previous, chunk in zip(mine, mine[1:]):
            assert chunk.rtc and chunk.inference_delay >= 1
            offset = round((chunk.stamp - previous.stamp) / dt)
            frozen = min(chunk.inference_delay, len(previous.actions) - offset)
            if frozen <= 0:
                continue
            own_gaps.append(np.abs(chunk.actions[:frozen]
                                   - previous.actions[offset:offset + frozen]).mean())
            nearest = min(theirs, key=lambda c: abs(c.stamp - previous.stamp))
            cross_gaps.append(np.abs(chunk.actions[:frozen]
                                     - nearest.actions[offset:offset + frozen]).mean())
        # the plan each robot continues is its own newest chunk
        np.testing.assert_array_equal(engine.robots[robot].actions.plan[0].numpy(),
                                      mine[-1].actions)
    assert len(own_gaps) >= 6
    assert np.mean(own_gaps) * 5 < np.mean(cross_gaps), (own_gaps, cross_gaps)


def test_language_decodes_across_robots_and_answers_each_about_its_own_frames(tiny_model):
    engine, clock, model = fleet(tiny_model, ["a", "b"])
    events = Events(engine)
    batches = []
    decode = model.decode

    def recorded(tables, tokens, cache):
        batches.append(len(tables))
        return decode(tables, tokens, cache)
    model.decode = recorded
    drive(engine, clock, {"a": observations("a", 0), "b": observations("b", 1)}, duration=1.5,
          questions=[(0.3, "a", "what is on the table?"), (0.3, "b", "where is the cup?")])
    finals = {t.request_id: t for t in events.texts if t.kind == "dialogue" and t.final}
    assert {t.robot for t in finals.values()} == {"a", "b"}
    assert all(t.finish_reason == "length" for t in finals.values())
    frames_of = {r: {c.frame_id for c in events.chunks if c.robot == r} for r in "ab"}
    for text in finals.values():          # answered about a frame of its own robot
        assert text.frame_id in frames_of[text.robot]
        assert text.frame_id not in frames_of["b" if text.robot == "a" else "a"]
    # both answers (memory is off) decode in the same batched steps, token for token
    assert batches.count(2) >= engine.config.dialogue_max_tokens - 1, batches


def test_one_robots_burst_keeps_its_own_limit_and_the_others_request_goes_first():
    scheduler = Scheduler(config())
    burst = [request(i, "a") for i in range(1, 6)]
    other = request(6, "b")
    for r in (*burst, other):
        scheduler.submit(r)
    order = []
    while (r := scheduler.next_waiting()) is not None:
        scheduler.start(r)
        r.generated.append(0)
        r.fed = len(r.prompt)
        order.append(r.id)
    assert order == [1, 6, 2, 3, 4, 5]           # b's one request right after a's first
    assert [r.id for r in scheduler.decodable()] == [1, 6, 2, 3, 4, 5]


def test_a_robots_requests_over_its_limit_are_refused_without_touching_the_others(tiny_model):
    engine, clock, _ = fleet(tiny_model, ["a", "b"], max_pending_requests=3)
    events = Events(engine)
    for i in range(5):
        engine.submit_dialogue(f"question {i}", robot="a")
    engine.submit_dialogue("and you?", robot="b")
    engine.drain()
    refused = [t for t in events.texts if t.final and t.finish_reason == "queue_full"]
    assert [t.robot for t in refused] == ["a", "a"]
    assert engine.counters["rejected_requests"] == 2
    assert sum(r.robot == "b" for r in engine.scheduler.waiting) == 1
    with pytest.raises(ValueError, match="robot 'c' is not one this engine serves"):
        engine.submit_dialogue("hello", robot="c")


def test_each_robot_has_its_own_share_of_the_request_counters(tiny_model):
    """One robot's refused, cut and cancelled requests are its own: the other's status
    reads none of them (robot_values), while the engine's counters hold them all."""
    from oxygen_ros.ros.inference_health import robot_values

    engine, clock, _ = fleet(tiny_model, ["a", "b"], max_pending_requests=2,
                             max_request_tokens=48)
    for text in ("a long question " * 10, "second", "third"):
        engine.submit_dialogue(text, robot="a")
    engine.submit_dialogue("and you?", robot="b")
    engine.drain()
    cancelled = next(r.id for r in engine.scheduler.waiting if r.robot == "a")
    engine.cancel_dialogue(cancelled)
    engine.drain()
    a, b = robot_values(engine, "a"), robot_values(engine, "b")
    assert (a["truncated_requests"], a["rejected_requests"], a["cancelled_requests"]) == (1, 1, 1)
    assert (b["truncated_requests"], b["rejected_requests"], b["cancelled_requests"]) == (0, 0, 0)
    assert engine.counters["truncated_requests"] == engine.counters["rejected_requests"] == 1
    # nothing observed yet: a's one request left and b's wait for their robots' frames
    assert (a["pending_requests"], a["waiting_for_observation"]) == (1, 1)
    assert (b["pending_requests"], b["waiting_for_observation"]) == (1, 1)


def test_a_robot_the_capacity_cannot_serve_is_refused_with_the_numbers(tiny_model):
    # one chunk costs 60 ms of action path, each more robot 60 ms more: a 0.2 s period
    # with a 25 % language floor holds two robots, not three
    engine, clock, _ = fleet(tiny_model, ["a", "b", "c"], actions=lambda batch: 0.05 * batch)
    assert not engine.robots["a"].refused and not engine.robots["b"].refused
    reason = engine.robots["c"].refused
    assert reason.startswith("refused: 3 robots would miss their targets"), reason
    assert "action path" in reason and "ms" in reason and "2 are served" in reason
    assert engine.fleet_capacity(2).meets_targets and not engine.fleet_capacity(3).meets_targets
    # the served plan with the path of the robots served together, not of all three
    for robot in engine.robots.values():
        assert robot.timing.action_path_max() == pytest.approx(max(engine.fleet_paths[2]))
    assert max(engine.fleet_paths[2]) < min(engine.fleet_paths[3])
    events = Events(engine)
    engine.submit_dialogue("hello", robot="c")
    engine.drain()
    assert [(t.robot, t.finish_reason) for t in events.texts] == [("c", "robot_refused")]
    frames = drive(engine, clock, {r: observations(r, i) for i, r in enumerate("abc")},
                   duration=1.0)
    assert frames and all("c" not in frame for frame in frames)
    assert {c.robot for c in events.chunks} == {"a", "b"}
    with pytest.raises(ValueError, match="'c' refused"):
        engine.serve([observations("c", 2)[0]])


def test_a_machine_that_slows_at_run_time_sheds_the_last_robot_and_takes_it_back_later(
        tiny_model):
    # admitted on a quiet machine (3 robots: 80 ms of action path a frame, 2: 50 ms); then
    # every action pass costs 4x (another job took the cores) until the load goes: 3 robots'
    # plans (230 ms a frame) cannot be kept fed in a 0.4 s horizon, 2 robots' (140 ms) can
    load = [1.0]
    engine, clock, _ = fleet(tiny_model, ["a", "b", "c"], dialogue_max_tokens=400,
                             memory_period_s=1.0,
                             actions=lambda batch: load[0] * (0.01 + 0.02 * (batch - 1)))
    assert not any(robot.refused for robot in engine.robots.values())
    events = Events(engine)

    def feeds(seconds):
        return {r: observations(r, i, count=int(seconds * 30) + 30) for i, r in enumerate("abc")}
    drive(engine, clock, feeds(1.0), duration=1.0)
    assert engine.counters["deadline_misses"] == 0 and engine.counters["robots_shed"] == 0
    load[0] = 4.0
    # c's long answer is running when the load comes
    drive(engine, clock, feeds(2.0), duration=2.0, questions=[(0.0, "c", "a long story")])
    reason = engine.robots["c"].refused
    assert reason.startswith("shed at run time: with 3 robots running"), reason
    assert "could not be kept fed" in reason and "2 of the 3 running are kept" in reason
    assert not engine.robots["a"].refused and not engine.robots["b"].refused
    assert engine.counters["robots_shed"] == 1 and engine.robots["c"].times_shed == 1
    assert [(t.robot, t.finish_reason) for t in events.texts
            if t.final and t.kind == "dialogue"] == [("c", "robot_refused")]
    assert engine.robots["c"].newest is None        # its prefix pages are back in the pool
    assert engine.pages_in_use() == sum(
        len(engine.robots[r].newest[0].pages) for r in "ab") + sum(
        len(r.table.pages) for r in engine.scheduler.running)
    # still loaded, for more than the 64 frames c's return waits for: the two served keep
    # their plans fed and c gets nothing (unscaled, 2 robots' paths would leave room)
    misses, shed_at = engine.counters["deadline_misses"], clock.now()
    drive(engine, clock, feeds(16.0), duration=16.0)
    assert engine.counters["deadline_misses"] == misses
    after = [c for c in events.chunks if c.stamp >= shed_at]
    assert {c.robot for c in after} == {"a", "b"}
    assert len([c for c in after if c.robot == "a"]) > 2 * READMIT_AFTER
    assert engine.robots["c"].refused and engine.counters["robots_readmitted"] == 0
    # the load goes: c joins again
    load[0] = 1.0
    calm_at = clock.now()
    drive(engine, clock, feeds(20.0), duration=20.0)
    assert not engine.robots["c"].refused
    assert engine.counters["robots_readmitted"] == 1 and engine.counters["robots_shed"] == 1
    # c returns after 64 frames in a row whose paths leave room (once the window holds
    # more calm paths than loaded ones), not much later
    robots = [c.robot for c in events.chunks if c.stamp >= calm_at]
    returned = robots.index("c")
    assert 2 * READMIT_AFTER <= robots[:returned].count("a") <= 2 * READMIT_AFTER + 32
    assert robots[returned:].count("c") >= 8
    # c's memory starts again where its frames do: no window spans the time it was shed
    back_at = next(c.stamp for c in events.chunks if c.stamp >= calm_at and c.robot == "c")
    windows = [(s.window_start, s.window_end) for s in events.summaries if s.robot == "c"]
    assert windows and all(end <= shed_at or start >= back_at for start, end in windows), (
        windows, shed_at, back_at)


def test_a_shed_robot_is_not_taken_back_on_the_room_a_served_robots_silent_camera_left(
        tiny_model):
    # loaded 4x: 2 robots' plans (140 ms a frame) are kept fed, 3 robots' (230 ms) are not;
    # c is shed, then b's camera goes quiet: a alone leaves room for a second robot, but b
    # is still served and comes back, so c must wait for room for three
    load = [1.0]
    engine, clock, _ = fleet(tiny_model, ["a", "b", "c"],
                             actions=lambda batch: load[0] * (0.01 + 0.02 * (batch - 1)))

    def feeds(seconds, robots="abc"):
        return {r: observations(r, i, count=int(seconds * 30) + 30)
                for i, r in enumerate("abc") if r in robots}
    loop = FrameLoop(engine)
    drive(engine, clock, feeds(1.0), duration=1.0, loop=loop)
    load[0] = 4.0
    drive(engine, clock, feeds(2.0), duration=2.0, loop=loop)
    assert engine.robots["c"].refused and engine.counters["robots_shed"] == 1
    drive(engine, clock, feeds(30.0, robots="a") | {"b": [], "c": []}, duration=30.0,
          loop=loop)
    assert engine.robots["b"].timing.plan_stamp is None          # b's actions stopped
    assert engine.robots["c"].refused and engine.counters["robots_readmitted"] == 0
    misses = engine.counters["deadline_misses"]
    drive(engine, clock, feeds(3.0), duration=3.0, loop=loop)    # b's camera is back
    assert engine.counters["robots_shed"] == 1 and engine.counters["deadline_misses"] == misses


def test_a_refused_robot_is_judged_by_the_path_of_all_robots_in_one_frame_not_by_split_frames(
        tiny_model):
    # a and b run on different phases, one robot a frame (20 ms); c was refused at start-up
    # (3 robots in one frame: 200 ms). Split frames leave room, but c would share a's frames
    engine, clock, _ = fleet(tiny_model, ["a", "b", "c"],
                             actions=lambda batch: {1: 0.02, 2: 0.06}.get(batch, 0.2))
    assert engine.robots["c"].refused
    feeds = {"a": observations("a", 0, count=600),
             "b": observations("b", 1, offset=0.1, count=600),
             "c": observations("c", 2, count=600)}
    frames = drive(engine, clock, feeds, duration=15.0)
    assert frames.count(["a"]) >= 60 and frames.count(["b"]) >= 60, frames
    assert all("c" not in frame for frame in frames)
    assert engine.counters["robots_readmitted"] == 0
    assert engine.counters["deadline_misses"] == 0


def test_a_refused_robot_waits_for_the_first_robots_frames_whatever_the_others_phases(
        tiny_model):
    # calibrated while another job ran (3 robots in one frame: 160 ms of denoising, too
    # slow; 2 or 1: 40 ms), then every pass takes half as long: a and b, on different
    # phases, leave room for c
    costs = {1: 0.04, 2: 0.04, 3: 0.16}
    engine, clock, _ = fleet(tiny_model, ["a", "b", "c"], actions=lambda batch: costs[batch])
    assert engine.robots["c"].refused
    costs.update({1: 0.02, 2: 0.02, 3: 0.08})
    events = Events(engine)
    feeds = {"a": observations("a", 0, count=600),
             "b": observations("b", 1, offset=0.07, count=600),
             "c": observations("c", 2, count=600)}
    frames = drive(engine, clock, feeds, duration=15.0)
    returned = next(i for i, frame in enumerate(frames) if "c" in frame)
    assert frames[:returned].count(["b"]) >= READMIT_AFTER, frames   # b on its own phase
    # a's frames count, b's in between do not
    a_frames = [c for c in events.chunks if c.robot == "a"]
    before = sum(c.stamp < next(c.stamp for c in events.chunks if c.robot == "c")
                 for c in a_frames)
    assert READMIT_AFTER + SHED_AFTER - 1 <= before <= READMIT_AFTER + SHED_AFTER + 2, before
    assert engine.counters["robots_readmitted"] == 1
    assert engine.counters["deadline_misses"] == 0



def test_each_action_path_keeps_the_robots_its_frame_served():
    timing = FrameTiming(config(frame_period_s=PERIOD), 10)
    timing.observe_action_path(0.05, 2)
    timing.observe_action_path(0.03)
    assert timing.recent_frames(5) == [(0.05, 2), (0.03, 1)]
    assert timing.recent_frames(1) == [(0.03, 1)] and timing.recent_frames(0) == []
    timing.forget_action_paths()        # a readmitted robot's paths before its shed
    timing.observe_action_path(0.04, 3)
    assert timing.recent_frames(5) == [(0.04, 3)]


def test_the_robots_kept_are_sized_from_the_robots_of_the_judged_path(tiny_model):
    # calibrated (action path + 10 ms prefill a robot): 1 robot 30 ms, 2 robots 80 ms,
    # 3 robots 230 ms; the 0.4 s plan is fed by a path up to about 150 ms
    engine, _, _ = fleet(tiny_model, ["a", "b", "c"], admission=False,
                         actions=lambda batch: {1: 0.02, 2: 0.06}.get(batch, 0.2))
    running, a = list(engine.robots.values()), engine.robots["a"]
    # 300 ms alone on its phase: two robots in one frame would take 800 ms; keep one
    a.timing.observe_action_path(0.3, 1)
    assert engine.robots_kept(running, a) == 1
    # 250 ms with all three in its frame: two would take about 90 ms; keep two
    a.timing.observe_action_path(0.25, 3)
    assert engine.robots_kept(running, a) == 2

def test_a_load_that_only_one_robot_survives_sheds_the_other_three_at_once(tiny_model):
    # 4 robots: 110 ms a frame, quiet; at 6x, even 2 robots' path (200 ms) starves the
    # 0.4 s plan and one robot's (70 ms) does not
    load = [1.0]
    engine, clock, _ = fleet(tiny_model, list("abcd"),
                             actions=lambda batch: load[0] * (0.01 + 0.02 * (batch - 1)))
    assert not any(robot.refused for robot in engine.robots.values())
    feeds = {r: observations(r, i, count=200) for i, r in enumerate("abcd")}
    drive(engine, clock, feeds, duration=1.0)
    load[0] = 6.0
    events = Events(engine)
    drive(engine, clock, feeds, duration=1.5)
    assert [r.name for r in engine.robots.values() if r.refused] == ["b", "c", "d"]
    assert [r.times_shed for r in engine.robots.values()] == [0, 1, 1, 1]
    assert "1 of the 4 running are kept" in engine.robots["d"].refused
    # judged within a few loaded frames, and sized by the newest path: shed at once
    assert sum(c.late for c in events.chunks if c.robot == "a") <= 3
    assert engine.counters["robots_shed"] == 3
    misses = engine.counters["deadline_misses"]
    events = Events(engine)
    drive(engine, clock, feeds, duration=3.0)
    assert engine.counters["deadline_misses"] == misses
    assert {c.robot for c in events.chunks} == {"a"} and len(events.chunks) >= 10


def test_one_stalled_frame_sheds_nobody(tiny_model):
    calls = [0]

    def actions(batch):     # the 20th action pass stalls for 0.3 s: alone, a plan not fed
        calls[0] += 1
        return 0.3 if calls[0] == 20 else 0.01 + 0.02 * (batch - 1)
    engine, clock, _ = fleet(tiny_model, ["a", "b", "c"], actions=actions)
    drive(engine, clock, {r: observations(r, i) for i, r in enumerate("abc")}, duration=5.0)
    assert calls[0] > 30 and engine.counters["deadline_misses"] >= 1
    assert engine.counters["robots_shed"] == 0
    assert not any(robot.refused for robot in engine.robots.values())


def test_with_admission_off_every_robot_is_served_and_plans_with_the_whole_fleets_path(
        tiny_model):
    engine, clock, _ = fleet(tiny_model, ["a", "b", "c"], actions=lambda batch: 0.05 * batch,
                             admission=False)
    assert not any(robot.refused for robot in engine.robots.values())
    assert not engine.fleet_capacity(3).meets_targets        # measured, not enforced
    for robot in engine.robots.values():
        assert robot.timing.action_path_max() == pytest.approx(max(engine.fleet_paths[3]))
    events = Events(engine)
    drive(engine, clock, {r: observations(r, i) for i, r in enumerate("abc")}, duration=1.0)
    assert {c.robot for c in events.chunks} == {"a", "b", "c"}


def test_a_silent_robot_leaves_the_others_running(tiny_model):
    engine, clock, _ = fleet(tiny_model, ["a", "b"])
    events = Events(engine)
    feeds = {"a": observations("a", 0), "b": observations("b", 1, count=15)}   # b: 0.5 s
    start = clock.now()
    drive(engine, clock, feeds, duration=2.0)
    a_chunks = [c for c in events.chunks if c.robot == "a"]
    assert np.diff([c.stamp for c in a_chunks]).max() <= PERIOD + 1 / 30 + 1e-9
    assert engine.counters["deadline_misses"] == 0
    assert max(c.stamp for c in events.chunks if c.robot == "b") - start <= 0.5
    assert a_chunks[-1].stamp - start >= 1.7


def test_a_robots_paused_camera_does_not_slow_another_robots_answer(tiny_model):
    """b's camera pauses for less than the watchdog (its plan stays in force, its frames wait
    for a newer observation): a's answer decodes as fast as when b's camera is gone."""
    tokens = {}
    for b_camera in ("paused", "gone"):
        engine, clock, _ = fleet(tiny_model, ["a", "b"], dialogue_max_tokens=1000,
                                 tokens_per_frame=20, max_tokens_per_frame=40)
        loop, start = FrameLoop(engine), clock.now()
        feeds = {"a": observations("a", 0), "b": observations("b", 1)}
        engine.submit_dialogue("describe it", robot="a")
        while clock.now() < start + 1.0:
            now = clock.now() - start
            newest = {robot: [o for o in feed if o.stamp <= now][-1]
                      for robot, feed in feeds.items()}
            if now > 0.2:
                newest["b"] = ([o for o in feeds["b"] if o.stamp <= 0.2][-1]
                               if b_camera == "paused" else None)
            clock.advance(loop.run_robots({robot: dataclasses.replace(o, stamp=start + o.stamp)
                                           if o is not None else None
                                           for robot, o in newest.items()}))
        tokens[b_camera] = engine.counters["tokens"]
    assert tokens["paused"] >= 0.8 * tokens["gone"], tokens


def request(request_id, robot):
    return LanguageRequest(id=request_id, kind="dialogue", priority=2, prompt=[1, 2],
                           max_tokens=4, arrival=float(request_id), stream=ByteTokenizer().stream(),
                           generator=torch.Generator(), robot=robot, status=Status.WAITING)


def test_each_robot_has_its_own_memory_windows(tiny_model):
    engine, clock, _ = fleet(tiny_model, ["a", "b"], memory_period_s=0.5)
    events = Events(engine)
    start = clock.now()
    # b starts 0.3 s after a: its windows are its own, not a's
    drive(engine, clock, {"a": observations("a", 0), "b": observations("b", 1, offset=0.3)},
          duration=2.5)
    summaries = {r: [s for s in events.summaries if s.robot == r] for r in "ab"}
    assert all(len(s) >= 2 for s in summaries.values()), summaries
    stamps = {r: {round(c.stamp - start, 6) for c in events.chunks if c.robot == r} for r in "ab"}
    for robot, mine in summaries.items():
        for summary in mine:
            assert round(summary.window_end - start, 6) in stamps[robot]
            assert summary.window_end - summary.window_start >= 0.5
        assert mine[0].window_start - start == pytest.approx(0.0 if robot == "a" else 0.3,
                                                             abs=1 / 30 + 1e-9)
        # a summary counts the robot's own frames (its prompt numbers them), not the fleet's
        served = [s for s in stamps[robot] if s <= round(mine[-1].window_end - start, 6)]
        assert sum(summary.frames for summary in mine) == len(served)


def test_each_robots_requests_sample_from_their_own_random_streams():
    """Memory and dialogue requests count from 1 for each robot: with temperature above 0,
    robot a's first summary, robot b's and a first question each draw their own numbers,
    the same ones each run."""
    def draws(kind, robot, request_id):
        return torch.rand(4, generator=sampling_generator(0, kind, robot, request_id)).tolist()
    first = {(kind, robot): draws(kind, robot, 1) for kind in ("memory", "dialogue")
             for robot in ("a", "b")}
    assert len({tuple(values) for values in first.values()}) == 4
    assert draws("memory", "a", 1) == first[("memory", "a")]
    assert draws("memory", "a", 2) != first[("memory", "a")]


def test_a_pool_that_cannot_hold_one_prefix_per_robot_is_refused_at_start(tiny_model):
    one = OxygenEngine(tiny_model, config(), calibrate=False)
    prefix, request = (one.cache.pages_for(tokens) for tokens in
                       (one.max_prefix_tokens, request_tokens(one.config)))
    pages = 2 * prefix + request + 1      # the newest prefix, one request whole, a page
    assert OxygenEngine(tiny_model, config(num_pages=pages), calibrate=False).cache
    with pytest.raises(ValueError, match=f"cannot hold 2 robot\\(s\\)' newest observation "
                                         f".*raise num_pages to {pages + prefix}$"):
        OxygenEngine(tiny_model, config(num_pages=pages), calibrate=False, robots=["a", "b"])
