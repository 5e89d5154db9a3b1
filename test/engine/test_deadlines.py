"""The motor deadline holds: under slow language steps and page shortage, every frame's
chunk is out in time (a manual clock and fixed step costs, not wall time); language
is throttled or preempted and resumes with exactly its tokens; pages always come back."""

import dataclasses
import random

import pytest
from engine_helpers import Events, TimedModel, config, stream

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.engine.baselines import SharedKVEngine
from oxygen_ros.engine.clock import ManualClock
from oxygen_ros.engine.oxygen import OxygenEngine
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model


def control_loop(engine, clock, frames, period, arrivals=None, drain=40):
    """Start frame i at its tick (or as soon as the previous frame ends, if it overran), on
    observation i taken at that tick."""
    reports = []
    observations = list(frames) + [frames[-1]] * drain
    first_tick = clock.now()   # after the engine's start-up calibration
    for index, observation in enumerate(observations):
        clock.set(first_tick + index * period)
        tick = clock.now()
        for text in (arrivals or {}).get(index, []):
            engine.submit_dialogue(text)
        reports.append(engine.step(dataclasses.replace(observation, stamp=tick),
                                   frame_start=tick))
        if index >= len(frames) and not engine.pending_requests:
            break
    return reports


ARRIVALS = {0: ["hi"], 1: ["what is that?", "and that?"], 3: ["stop"], 6: ["go on"]}


@pytest.mark.parametrize("decode_cost", [0.01, 0.04, 0.045])
def test_slow_language_steps_are_throttled_and_never_delay_a_chunk(tiny_model, decode_cost):
    clock = ManualClock()
    model = TimedModel(tiny_model, clock, decode=decode_cost)
    engine = OxygenEngine(model, config(frame_period_s=0.1, language_floor=0.0,
                                        deadline_margin_s=0.0), clock=clock)
    events = Events(engine)
    reports = control_loop(engine, clock, stream(12), 0.1, ARRIVALS)
    assert [c.frame_id for c in events.chunks] == list(range(len(reports)))   # none missing
    assert engine.counters["deadline_misses"] == 0 and not any(c.late for c in events.chunks)
    # no frame overruns its period by more than the one decode step language always gets
    assert all(r.latency_s <= 0.1 + decode_cost + 1e-9 for r in reports)
    # slower steps fit fewer tokens into the same frames, but all requests finish
    assert engine.pending_requests == 0
    if decode_cost >= 0.04:
        assert engine.counters["throttled_frames"] > 0


def test_throttled_dialogue_is_the_same_text(tiny_model):
    # (memory summaries are due by sensor time, so throttling may move them to other frames)
    def texts(control_period):
        clock = ManualClock()
        engine = OxygenEngine(TimedModel(tiny_model, clock, decode=0.04),
                              config(frame_period_s=control_period, memory_period_s=0),
                              clock=clock)
        events = Events(engine)
        control_loop(engine, clock, stream(12), control_period or 0.1, ARRIVALS)
        return events.text_by_request()

    assert texts(0.1) == texts(None)


def test_page_shortage_preempts_language_and_actions_still_run_on_time(tiny_model):
    clock = ManualClock()
    model = TimedModel(tiny_model, clock)
    # the least the start-up check accepts: 2 prefixes of 5 pages, 7 for 80 + 20 tokens, 1
    tight = dict(num_pages=18, frame_period_s=0.1, dialogue_max_tokens=20, max_request_tokens=80)
    engine = OxygenEngine(model, config(**tight), clock=clock)
    events = Events(engine)
    arrivals = {i: ["tell me everything you see on the table right now"] for i in range(8)}
    reports = control_loop(engine, clock, stream(10), 0.1, arrivals, drain=200)
    assert engine.counters["preemptions"] > 0
    assert [c.frame_id for c in events.chunks] == list(range(len(reports)))
    assert not any(c.late for c in events.chunks)
    assert engine.pending_requests == 0
    engine.release_newest()
    engine.cache.pool.check_whole()


def test_preempted_requests_resume_with_exactly_the_tokens_of_an_uninterrupted_decode(tiny_model):
    clock = ManualClock()
    engine = OxygenEngine(TimedModel(tiny_model, clock),
                          config(num_pages=18, dialogue_max_tokens=20, max_request_tokens=80,
                                 memory_period_s=0),
                          clock=clock)
    finished = []
    finish = engine.scheduler.finish
    engine.scheduler.finish = lambda request, reason: (finished.append(request),
                                                       finish(request, reason))
    arrivals = {i: ["tell me everything you see on the table right now"] for i in range(8)}
    control_loop(engine, clock, stream(10), 0.1, arrivals, drain=200)
    resumed = [r for r in finished if r.preemptions]
    assert resumed
    for request in resumed:
        cache = KVCache.for_model(tiny_model.config, num_pages=64, page_size=16)
        table = tiny_model.prefill(request.prefix, cache)
        assert cache.reserve(table, len(request.prompt) + request.max_tokens)
        tokens = [int(tiny_model.extend(table, request.prompt, cache).argmax())]
        while len(tokens) < request.max_tokens:
            tokens.append(int(tiny_model.decode([table], [tokens[-1]], cache)[0].argmax()))
        assert request.generated == tokens


def test_at_the_least_pool_the_check_accepts_an_answer_across_frames_ends_whole(tiny_model):
    """An answer that spans frames (12 tokens at 0.03 s each, frames every 0.1 s) keeps its
    own frame's prefix while each next frame's is prefilled beside it: at the least pool
    the start-up check accepts, it ends whole and nothing is preempted."""
    clock = ManualClock()
    least = config(num_pages=14, frame_period_s=0.1, max_request_tokens=32,
                   memory_period_s=0, dialogue_max_tokens=12)
    engine = OxygenEngine(TimedModel(tiny_model, clock, decode=0.03), least, clock=clock)
    events = Events(engine)
    asked = engine.submit_dialogue("what is on the table?")
    control_loop(engine, clock, stream(10), 0.1, drain=40)
    (final,) = [t for t in events.texts if t.final]
    assert (final.request_id, final.finish_reason) == (asked, "length")
    assert engine.counters["kv_full_requests"] == 0 and engine.counters["preemptions"] == 0


@pytest.mark.parametrize("feeding", [False, True])
def test_a_request_the_pool_cannot_hold_even_alone_ends_kv_full_and_the_next_is_answered(
        tiny_model, feeding):
    """Decoding: an answer beyond the configured limits (an Ask's own max_tokens) fills the
    pool token by token; feeding: a memory template longer than the pool beside the prefixes
    (the start-up check holds a dialogue request at its limits, not a template's length)."""
    clock = ManualClock()
    long_template = "x" * 300 + "{previous} {first}-{last}: "
    pool = config(num_pages=14, frame_period_s=0.1, request_timeout_s=0.0,
                  max_request_tokens=32, memory_period_s=0.25 if feeding else 0.0,
                  **({"memory_template": long_template} if feeding else {}))
    engine = OxygenEngine(TimedModel(tiny_model, clock), pool, clock=clock)
    events = Events(engine)
    endless = None if feeding else engine.submit_dialogue("tell me everything",
                                                          max_tokens=100_000)
    short = engine.submit_dialogue("hi", max_tokens=5)
    at_the_end = []     # (pages the pool uses, the ending request's and the newest prefix's)
    ending = engine.out_of_pages
    engine.out_of_pages = lambda request: (at_the_end.append((
        engine.cache.pool.used_pages, set(request.table.pages) | set(engine.newest[0].pages),
        engine.cache.pool.can_allocate(1))), ending(request))
    control_loop(engine, clock, stream(4), 0.1, drain=40)
    ends = {(t.kind, t.request_id): t.finish_reason for t in events.texts if t.final}
    cut = ("memory", 1) if feeding else ("dialogue", endless)
    assert ends[cut] == "kv_full" and ends[("dialogue", short)] == "length"
    (used, held, page_free), *_ = at_the_end
    assert used == len(held)            # nothing else to preempt
    if feeding:
        assert not events.summaries and events.text_by_request()[cut] == ""
    else:                               # cut where the pool ran out
        assert engine.counters["tokens"] - 5 > 0 and not page_free
    assert engine.counters["kv_full_requests"] == len(at_the_end)
    engine.release_newest()
    engine.cache.pool.check_whole()


@pytest.mark.parametrize("page_size", [1, 2, 3, 5, 7, 16])
def test_the_start_up_measurement_fits_every_page_size(tiny_model, page_size):
    # it decodes 8 tokens on one fork of the blank prefix: its reservation must cover them
    # wherever the page boundaries fall
    engine = OxygenEngine(tiny_model, config(page_size=page_size, num_pages=4096 // page_size))
    assert engine.pages_in_use() == 0 and engine.costs.decode(1) > 0


def test_a_pool_that_cannot_hold_a_prefix_beside_one_request_whole_is_refused_at_start(
        tiny_model):
    # 2 prefixes of 5 pages (the newest, and a request's own frame's), 3 pages for its 32
    # prompt and 12 answer tokens, and one page
    with pytest.raises(ValueError, match=r"num_pages=13 cannot hold 1 robot\(s\)' newest "
                                         r".*: 14 pages of 16; raise num_pages to 14"):
        OxygenEngine(tiny_model, config(num_pages=13, max_request_tokens=32))
    OxygenEngine(tiny_model, config(num_pages=14, max_request_tokens=32))


def test_a_cache_the_machine_cannot_allocate_is_refused_naming_its_size_and_settings():
    """An action_horizon past any memory (past the 128 TiB a process can address, whatever
    the machine's overcommit rule): the allocator's error, with what to fix."""
    model = Pi05Model(preset("tiny").with_(action_horizon=2**40), seed=0).eval()
    with pytest.raises(ValueError, match=r"the KV cache \(\d+\.\d\d GiB: num_pages 512 x "
                                         r"page_size 16 tokens, and action_horizon "
                                         r"1099511627776 tokens for each of 1 robot\(s\)\) "
                                         r"cannot be allocated on cpu: .*allocate"):
        OxygenEngine(model, config(num_pages=512, page_size=16))


@pytest.mark.parametrize("engine_class", [OxygenEngine, SharedKVEngine])
@pytest.mark.parametrize("seed", [0, 1])
def test_after_random_arrivals_every_page_is_back_in_the_pool(tiny_model, engine_class, seed):
    rng = random.Random(seed)
    engine = engine_class(tiny_model, config(num_pages=64 if engine_class is OxygenEngine else 256))
    frames = stream(25, seed=seed, camera_every=rng.choice([1, 2, 3]))
    for observation in frames:
        for _ in range(rng.choice([0, 0, 1, 2, 3])):
            engine.submit_dialogue("x" * rng.randrange(1, 40), max_tokens=rng.randrange(1, 15))
        engine.step(observation)
    while engine.pending_requests:
        engine.step(frames[-1])
    if engine_class is OxygenEngine:
        engine.release_newest()
    engine.cache.pool.check_whole()


def test_idle_frames_keep_running_requests_decoding_and_attach_new_ones_to_the_newest_prefix(
        tiny_model):
    engine = OxygenEngine(tiny_model, config(memory_period_s=0, dialogue_max_tokens=9))
    events = Events(engine)
    engine.submit_dialogue("first")
    engine.step(stream(1)[0])                 # attaches and decodes a few tokens
    engine.submit_dialogue("second")          # arrives while no observation comes in
    while engine.pending_requests:
        assert engine.idle_step() > 0
    texts = events.text_by_request()
    assert sorted(texts) == [("dialogue", 1), ("dialogue", 2)] and not events.chunks[1:]
    # the late request read the last observation's prefix: the answer it would have had
    # if it had arrived during that frame
    alone = OxygenEngine(tiny_model, config(memory_period_s=0, dialogue_max_tokens=9))
    alone_events = Events(alone)
    alone.submit_dialogue("second")
    alone.step(stream(1)[0])
    while alone.pending_requests:
        alone.idle_step()
    assert alone_events.text_by_request()[("dialogue", 1)] == texts[("dialogue", 2)]


def test_requests_wait_for_an_observation_only_before_the_robots_first_frame(tiny_model):
    engine = OxygenEngine(tiny_model, config(memory_period_s=0, dialogue_max_tokens=4))
    engine.submit_dialogue("before any frame")
    engine.drain()
    waiting = lambda: engine.requests_of("")["waiting_for_observation"]    # noqa: E731
    assert not engine.robot.observed and waiting() == 1
    engine.step(stream(1)[0])
    assert engine.robot.observed and waiting() == 0
    # a frame replaces the newest prefix: a request arriving meanwhile waits for the
    # frame's end, not for an observation
    engine.release_newest()
    engine.submit_dialogue("during a frame")
    engine.drain()
    assert engine.robot.newest is None and waiting() == 0
