"""The real-time contract, on a manual clock with injected step costs (no wall time):
the plan in force never runs out while the machine can feed it, language keeps its floor
and every request ends, and where the plan cannot be fed the held fraction is predicted."""

import dataclasses
import math
from collections import Counter

import pytest
from engine_helpers import Events, TimedModel, config, simulate, stream

from oxygen_ros.engine.clock import ManualClock
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.frame_loop import FrameLoop
from oxygen_ros.engine.frame_timing import FrameTiming, takeover_s
from oxygen_ros.engine.oxygen import OxygenEngine

TARGET = 0.1
REALTIME = dict(frame_period_s=TARGET, action_dt_s=0.3, blend_s=0.1, deadline_margin_s=0.02,
                language_floor=0.2, memory_period_s=1.0, dialogue_max_tokens=10)  # H·dt = 1.2 s
DECODE_S = 0.01
QUESTIONS = {0.05: ["hi"], 0.3: ["what is that?", "and that?"], 1.0: ["stop"],
             2.0: ["go on"], 2.05: ["tell me everything you see on the table right now"]}


def engine_with_costs(tiny_model, action_path, **overrides):
    clock = ManualClock()
    model = TimedModel(tiny_model, clock, prefill=0.4 * action_path, actions=0.6 * action_path,
                       extend=0.004, decode=DECODE_S)
    return OxygenEngine(model, config(**(REALTIME | overrides)), clock=clock), clock


@pytest.mark.parametrize("ratio", [0.5, 1, 2, 4])
def test_language_keeps_its_floor_and_the_plan_never_runs_out(tiny_model, ratio):
    engine, clock = engine_with_costs(tiny_model, ratio * TARGET)
    run = simulate(engine, clock, duration=8.0, delivery_s=0.01, arrivals=QUESTIONS)
    floor = engine.config.language_floor * TARGET
    assert engine.counters["deadline_misses"] == 0
    assert run.held == 0 and run.commands > 300
    # every frame: language worked for its floor (to within the one step that would have
    # overrun it), or ran out of work first; and running requests advanced
    for report in run.reports:
        language_s = report.latency_s - report.chunk.latency_s
        assert language_s >= floor - DECODE_S - 1e-9 or report.active_requests == 0, report
        assert report.tokens >= 1 or report.active_requests == 0, report
    # every dialogue request ends, and ends complete
    finals = run.finals()
    assert sorted(finals) == [1, 2, 3, 4, 5, 6]
    assert {t.finish_reason for t in finals.values()} == {"length"}
    assert sum(t.kind == "memory" and t.final for t in run.texts) >= 3
    # frames come at the target period while it can be met, back to back beyond it
    gaps = [b.chunk.stamp - a.chunk.stamp for a, b in zip(run.reports, run.reports[1:])]
    assert max(gaps) <= max(TARGET, ratio * TARGET + floor) + 1 / 30 + 0.01 + 1e-9


@pytest.mark.parametrize("switch, low, high", [("crossfade", 0.6, 0.72), ("rtc", 0.6, 0.72),
                                               ("none", 0.7, 0.8)])
def test_frames_start_just_in_time_when_the_target_period_is_too_long_for_the_plan(
        tiny_model, switch, low, high):
    engine, clock = engine_with_costs(tiny_model, 0.2, frame_period_s=2.0, action_dt_s=0.25,
                                      chunk_switch=switch)
    run = simulate(engine, clock, duration=6.0, arrivals={0.1: ["hi"]})
    assert engine.counters["deadline_misses"] == 0 and run.held == 0
    # H·dt = 1 s: a successor is due at its plan's end (a cross-fade or RTC: blend_s 0.05 s
    # earlier, for the fade or the guided overlap), minus the margin and the action path: a
    # frame every ~0.67 s (none: ~0.77 s) instead of the 2 s target
    gaps = [b.chunk.stamp - a.chunk.stamp for a, b in zip(run.reports, run.reports[1:])]
    assert low <= min(gaps) and max(gaps) <= high, gaps
    assert run.finals()[1].finish_reason == "length"


def test_the_time_a_successor_needs_after_the_takeover_depends_on_the_switch():
    """A cross-fade needs its whole fade; RTC its overlap, but never so much that a short plan
    could not run (it continues a plan that ends sooner by its held last step); none none."""
    for switch, horizon_s, expected in (("crossfade", 1.0, 0.1), ("rtc", 1.0, 0.1),
                                        ("rtc", 0.08, 0.03), ("rtc", 0.01, 0.0),
                                        ("none", 1.0, 0.0)):
        engine_config = EngineConfig(chunk_switch=switch, blend_s=0.1, deadline_margin_s=0.02)
        assert takeover_s(engine_config, horizon_s) == pytest.approx(expected), switch
    # the tiny preset's 4 steps at 50 Hz run with RTC, as with none; a cross-fade is refused
    for switch in ("rtc", "none"):
        FrameTiming(EngineConfig(chunk_switch=switch, frame_period_s=0.1), 4)
    with pytest.raises(ValueError, match="blend_s 0.1 s"):
        FrameTiming(EngineConfig(chunk_switch="crossfade", frame_period_s=0.1), 4)


def test_a_chunk_out_as_its_frozen_steps_end_is_no_late_switch(tiny_model):
    """An action path of exactly one step, observations taken as frames start: every chunk
    is out just as its one frozen step ends (arrival - stamp = d·dt, to rounding), which
    rtc_late_switches must not count (it counted 29 of 39 such chunks as late)."""
    engine, clock = engine_with_costs(tiny_model, 0.1, action_dt_s=0.1, frame_period_s=0.2,
                                      blend_s=0.0, deadline_margin_s=0.0)
    simulate(engine, clock, duration=8.0)
    assert engine.counters["deadline_misses"] == 0 and engine.counters["rtc_chunks"] > 30
    assert engine.counters["rtc_late_switches"] == 0


def test_a_plan_that_cannot_be_fed_holds_the_predicted_fraction(tiny_model):
    # H·dt = 1.2 s, action path 0.7 s: a sequential engine cannot replace a chunk in time
    engine, clock = engine_with_costs(tiny_model, 0.7, frame_period_s=0.5)
    capacity = engine.timing.capacity()
    assert not capacity.plan_fed and capacity.predicted_held_fraction > 0.1
    run = simulate(engine, clock, duration=12.0, delivery_s=0.02, arrivals=QUESTIONS)
    predicted = engine.timing.capacity().predicted_held_fraction
    assert abs(run.held_fraction - predicted) <= 0.05, (run.held_fraction, predicted)
    assert engine.counters["deadline_misses"] >= len(run.chunks) - 2
    # language still progresses: every request ends complete
    assert {t.finish_reason for t in run.finals().values()} == {"length"}
    assert len(run.finals()) == 6


def test_a_cold_cost_outlier_cannot_block_a_request(tiny_model):
    clock = ManualClock()
    # the first four prompt runs (start-up calibration) take 2 s each: the prompt estimate
    # is far beyond any frame's budget
    model = TimedModel(tiny_model, clock, prefill=0.02, actions=0.03,
                       extend=[2.0, 2.0, 2.0, 2.0, 0.004], decode=0.01)
    engine = OxygenEngine(model, config(**REALTIME), clock=clock)
    assert engine.costs.extend_per_token() > TARGET
    run = simulate(engine, clock, duration=3.0, arrivals={0.1: ["what do you see?"]})
    assert run.finals()[1].finish_reason == "length"
    assert engine.counters["deadline_misses"] == 0


def test_requests_attach_to_the_newest_prefix_while_observations_are_absent(tiny_model):
    engine, clock = engine_with_costs(tiny_model, 0.05)
    run = simulate(engine, clock, duration=5.0, observations_until=1.0,
                   arrivals={2.0: ["where is the cup?"], 3.0: ["and now?"]})
    finals = run.finals()
    assert [finals[i].finish_reason for i in (1, 2)] == ["length", "length"]
    first = run.chunks[0].stamp    # no chunk without observations (camera stops at 1.0 s)
    assert all(c.stamp - first < 1.0 for c in run.chunks)
    assert all(arrival - first < 1.6 for arrival in run.arrivals)


def test_language_keeps_its_rate_with_a_camera_slower_than_the_frame_period(tiny_model):
    """A 5 Hz camera against 0.1 s frames skips every other frame: an idle frame stands in
    for each, so language decodes at the frame period's rate, not the camera's, and the
    plan in force still never runs out."""
    tokens = {}
    for camera_hz in (30.0, 5.0):
        engine, clock = engine_with_costs(tiny_model, 0.5 * TARGET, memory_period_s=0.0,
                                          dialogue_max_tokens=1000)
        run = simulate(engine, clock, duration=3.0, camera_hz=camera_hz,
                       arrivals={0.0: ["describe the table"]})
        assert engine.counters["deadline_misses"] == 0 and run.held == 0, camera_hz
        tokens[camera_hz] = engine.counters["tokens"]
    assert tokens[5.0] >= 0.8 * tokens[30.0], tokens


def test_language_goes_on_while_a_paused_camera_leaves_the_same_observation(tiny_model):
    """A camera pausing for less than the watchdog: the node hands the engine the same
    fresh observation, none newer than the plan's; language decodes as it does while
    observations are absent."""
    engine, clock = engine_with_costs(tiny_model, 0.5 * TARGET, memory_period_s=0.0,
                                      dialogue_max_tokens=1000)
    loop = FrameLoop(engine)
    observation = dataclasses.replace(stream(1)[0], stamp=clock.now())
    clock.advance(loop.run_robots({"": observation}))
    engine.submit_dialogue("describe the table")
    tokens = {}
    for phase, newest in (("paused", observation), ("absent", None)):
        start, before = clock.now(), engine.counters["tokens"]
        while clock.now() < start + 0.5:
            clock.advance(loop.run_robots({"": newest}))
        tokens[phase] = engine.counters["tokens"] - before
    assert tokens["absent"] > 0 and tokens["paused"] >= 0.8 * tokens["absent"], tokens


@pytest.mark.parametrize("stopped", [True, False])
def test_idle_language_yields_to_an_observation_that_makes_a_frame_ready(tiny_model, stopped):
    """Idle language (observations stopped, or a frame skipped by a slow camera) must not
    hold back the frame an arriving observation makes ready: it ends after the step in
    progress, not at the idle frame's end; without one it runs its course."""
    ended = {}
    for arrives in (None, 0.01):
        engine, clock = engine_with_costs(tiny_model, 0.5 * TARGET, memory_period_s=0.0,
                                          dialogue_max_tokens=1000, tokens_per_frame=50,
                                          max_tokens_per_frame=50)
        first, later = (dataclasses.replace(o, stamp=clock.now() + i * 0.2)
                        for i, o in enumerate(stream(2)))
        arrived = {"at": float("inf")}

        def newest():
            if clock.now() >= arrived["at"]:
                return {"": later}
            return {"": None if stopped else first}
        loop = FrameLoop(engine, observations=newest)
        engine.submit_dialogue("describe the table")
        clock.advance(loop.run_robots({"": first}))      # a frame; its language feeds the prompt
        if not stopped:   # the camera pauses: the frame after is skipped half a period on
            clock.advance(1.5 * TARGET - (clock.now() - first.stamp))
        begun, throttled = clock.now(), engine.counters["throttled_frames"]
        arrived["at"] = begun + (arrives if arrives is not None else math.inf)
        assert loop.run_robots(newest() if arrives is None else {"": None if stopped
                                                                  else first}) == 0.0
        ended[arrives] = clock.now() - begun
        if arrives is not None:   # cut short for a frame: not a throttled one
            assert engine.counters["throttled_frames"] == throttled
    assert ended[None] >= 0.04, ended                      # language ran its course
    assert ended[0.01] <= 0.01 + DECODE_S + 1e-9, ended   # it yielded to the frame


def test_idle_language_feeding_a_long_prompt_yields_to_a_frame_after_its_first_piece(
        tiny_model):
    """A prompt of several pieces fed by idle language: an observation that makes a frame
    ready lets the guaranteed first piece (one extend pass, 10 ms here) finish, no more."""
    ended = {}
    for arrives in (None, 0.005):
        clock = ManualClock()
        model = TimedModel(tiny_model, clock, prefill=0.02, actions=0.03, extend=0.01,
                           decode=DECODE_S)
        engine = OxygenEngine(model, config(**(REALTIME | dict(
            memory_period_s=0.0, max_request_tokens=400))), clock=clock)
        first, later = (dataclasses.replace(o, stamp=clock.now() + i * 0.2)
                        for i, o in enumerate(stream(2)))
        arrived = {"at": math.inf}
        loop = FrameLoop(engine, observations=lambda: {
            "": later if clock.now() >= arrived["at"] else None})
        clock.advance(loop.run_robots({"": first}))
        engine.submit_dialogue("describe the table " * 15)     # longer than one piece
        begun = clock.now()
        arrived["at"] = begun + (arrives if arrives is not None else math.inf)
        clock.advance(loop.run_robots({"": None}))             # observations stopped: idle
        ended[arrives] = clock.now() - begun
    assert ended[None] >= 0.02, ended                        # the rest fed, then decoded
    assert ended[0.005] <= 0.01 + 1e-9, ended                # the first piece, then the frame


def test_without_any_observation_requests_wait_then_time_out_with_the_reason(tiny_model):
    engine, clock = engine_with_costs(tiny_model, 0.05, request_timeout_s=1.0)
    run = simulate(engine, clock, duration=3.0, observations_until=-1.0,
                   arrivals={0.0: ["anyone there?"]})
    assert not run.chunks
    (final,) = run.finals().values()
    assert final.finish_reason == "timeout" and final.text == ""
    assert engine.counters["timed_out_requests"] == 1 and engine.pending_requests == 0


def test_a_full_queue_ends_new_requests_at_once_with_the_reason(tiny_model):
    engine, clock = engine_with_costs(tiny_model, 0.05, max_pending_requests=3)
    run = simulate(engine, clock, duration=6.0, arrivals={0.2: ["q"] * 5})
    reasons = {i: t.finish_reason for i, t in run.finals().items()}
    assert reasons == {1: "length", 2: "length", 3: "length", 4: "queue_full",
                       5: "queue_full"}
    assert engine.counters["rejected_requests"] == 2


def test_a_blank_request_is_refused_before_it_takes_a_place(tiny_model):
    engine, _ = engine_with_costs(tiny_model, 0.05, max_pending_requests=1,
                                  dialogue_template="{text}")
    with pytest.raises(ValueError, match="a dialogue request needs text"):
        engine.submit_dialogue(" \n")
    assert engine.hold_place()                  # the one place is still free


def test_a_held_place_is_kept_for_its_request_and_comes_back_when_it_ends(tiny_model):
    # an accepted Ask goal holds its place until its execution submits the question: a
    # topic request in between finds the queue full instead of taking the goal's place
    engine, clock = engine_with_costs(tiny_model, 0.05, max_pending_requests=2)
    assert engine.hold_place() and engine.hold_place() and not engine.hold_place()
    assert engine.pending_dialogue_of("") == 2
    topic = engine.submit_dialogue("no place left")
    goal = engine.submit_dialogue("the held place", held=True)
    engine.give_back_place()                   # the other goal will not come
    later = engine.submit_dialogue("a place again")
    run = simulate(engine, clock, duration=4.0)
    reasons = {i: t.finish_reason for i, t in run.finals().items()}
    assert reasons == {topic: "queue_full", goal: "length", later: "length"}
    assert engine.pending_dialogue_of("") == 0 and engine.hold_place()


def test_a_steady_stream_of_questions_does_not_starve_memory_summaries(tiny_model):
    """One question a frame and prompt passes so dear that a frame attaches one request:
    dialogue outranks memory, yet a summary that a newer question overtook attaches next,
    so summaries keep coming and no request of either kind times out."""
    clock = ManualClock()
    model = TimedModel(tiny_model, clock, extend=0.03)
    engine = OxygenEngine(model, config(memory_period_s=0.5, frame_period_s=0.1, num_pages=400,
                                        request_timeout_s=3.0, dialogue_max_tokens=6,
                                        max_pending_requests=1000), clock=clock)
    events = Events(engine)
    for observation in stream(80):
        clock.set(observation.stamp)
        engine.submit_dialogue("what now?")
        engine.step(observation)
    finals = Counter((t.kind, t.finish_reason) for t in events.texts if t.final)
    assert finals[("memory", "timeout")] == 0 and finals[("dialogue", "timeout")] == 0
    assert len(events.summaries) >= 4 and finals[("memory", "length")] == len(events.summaries)
    assert finals[("dialogue", "length")] >= 65        # of 80, the last still in flight
