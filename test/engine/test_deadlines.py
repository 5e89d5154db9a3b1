"""The motor deadline holds: under slow language steps and page shortage, every frame's
chunk is out on time (a manual clock and fixed step costs, not wall time)."""

import random

import pytest
from engine_helpers import Events, config, stream

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.engine.baselines import SharedKVEngine
from oxygen_ros.engine.clock import ManualClock
from oxygen_ros.engine.oxygen import OxygenEngine


class TimedModel:
    """The real model, with each operation charging a fixed cost to a manual clock."""

    def __init__(self, model, clock, prefill=0.02, actions=0.03, extend=0.004, decode=0.01):
        self._model, self._clock = model, clock
        self.costs = dict(prefill=prefill, actions=actions, extend=extend, decode=decode)

    def __getattr__(self, name):
        return getattr(self._model, name)

    def _charged(self, name, result):
        self._clock.advance(self.costs[name])
        return result

    def prefill(self, *args, **kwargs):
        """Charged only when it computes: a hit, or a refusal for lack of pages, is cheap."""
        computed = self._model.counters["prefix_tokens_computed"]
        table = self._model.prefill(*args, **kwargs)
        if self._model.counters["prefix_tokens_computed"] > computed:
            self._clock.advance(self.costs["prefill"])
        return table

    def sample_actions(self, *args, **kwargs):
        return self._charged("actions", self._model.sample_actions(*args, **kwargs))

    def extend(self, *args, **kwargs):
        return self._charged("extend", self._model.extend(*args, **kwargs))

    def decode(self, *args, **kwargs):
        return self._charged("decode", self._model.decode(*args, **kwargs))


def control_loop(engine, clock, frames, period, arrivals=None, drain=40):
    """Start frame i at its tick (or as soon as the previous frame ends, if it overran)."""
    reports = []
    observations = list(frames) + [frames[-1]] * drain
    first_tick = clock.now()   # after the engine's start-up calibration
    for index, observation in enumerate(observations):
        tick = first_tick + index * period
        clock.set(tick)
        for text in (arrivals or {}).get(index, []):
            engine.submit_dialogue(text)
        reports.append(engine.step(observation, frame_start=tick))
        if index >= len(frames) and not engine.pending_requests:
            break
    return reports


ARRIVALS = {0: ["hi"], 1: ["what is that?", "and that?"], 3: ["stop"], 6: ["go on"]}


@pytest.mark.parametrize("decode_cost", [0.01, 0.04, 0.045])
def test_slow_language_steps_are_throttled_and_never_delay_a_chunk(tiny_model, decode_cost):
    clock = ManualClock()
    model = TimedModel(tiny_model, clock, decode=decode_cost)
    engine = OxygenEngine(model, config(control_period_s=0.1, action_deadline_s=0.06,
                                        language_margin_s=0.0), clock=clock)
    events = Events(engine)
    reports = control_loop(engine, clock, stream(12), 0.1, ARRIVALS)
    assert [c.frame_id for c in events.chunks] == list(range(len(reports)))   # none missing
    assert all(c.latency_s <= 0.06 + 1e-9 and not c.late for c in events.chunks)
    assert all(r.latency_s <= 0.1 + 1e-9 for r in reports)   # no frame overruns its period
    # slower steps fit fewer tokens into the same frames, but all requests finish
    assert engine.pending_requests == 0
    if decode_cost >= 0.04:
        assert engine.counters["throttled_frames"] > 0


def test_throttled_dialogue_is_the_same_text(tiny_model):
    # (memory summaries are due by sensor time, so throttling may move them to other frames)
    def texts(control_period):
        clock = ManualClock()
        engine = OxygenEngine(TimedModel(tiny_model, clock, decode=0.04),
                              config(control_period_s=control_period, language_margin_s=0.0,
                                     memory_period_s=0),
                              clock=clock)
        events = Events(engine)
        control_loop(engine, clock, stream(12), control_period or 0.1, ARRIVALS)
        return events.text_by_request()

    assert texts(0.1) == texts(None)


def test_page_shortage_preempts_language_and_actions_still_run_on_time(tiny_model):
    clock = ManualClock()
    model = TimedModel(tiny_model, clock)
    tight = dict(num_pages=18, control_period_s=0.1, action_deadline_s=0.06,
                 language_margin_s=0.0, dialogue_max_tokens=20)
    engine = OxygenEngine(model, config(**tight), clock=clock)
    events = Events(engine)
    arrivals = {i: ["tell me everything you see on the table right now"] for i in range(8)}
    reports = control_loop(engine, clock, stream(10), 0.1, arrivals, drain=200)
    assert engine.counters["preemptions"] > 0
    assert [c.frame_id for c in events.chunks] == list(range(len(reports)))
    assert not any(c.late for c in events.chunks)
    assert engine.pending_requests == 0
    engine.cache.pool.check_whole()



def test_preempted_requests_resume_with_exactly_the_tokens_of_an_uninterrupted_decode(tiny_model):
    clock = ManualClock()
    engine = OxygenEngine(TimedModel(tiny_model, clock),
                          config(num_pages=18, dialogue_max_tokens=20, memory_period_s=0),
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


def test_a_pool_that_cannot_hold_one_prefix_is_refused_at_start(tiny_model):
    with pytest.raises(ValueError, match="cannot hold one observation prefix"):
        OxygenEngine(tiny_model, config(num_pages=3))


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
    engine.cache.pool.check_whole()


def test_idle_frames_keep_running_requests_decoding_and_hold_new_ones(tiny_model):
    engine = OxygenEngine(tiny_model, config(memory_period_s=0, dialogue_max_tokens=9))
    events = Events(engine)
    engine.submit_dialogue("first")
    engine.step(stream(1)[0])                 # attaches and decodes a few tokens
    engine.submit_dialogue("second")          # arrives while no observation comes in
    while engine.scheduler.running:
        assert engine.idle_step() > 0
    assert [len(t) > 0 for t in events.text_by_request().values()] == [True]
    assert len(engine.scheduler.waiting) == 1 and not events.chunks[1:]
    engine.step(stream(2)[1])                 # the next observation takes the new request
    assert len(engine.scheduler.running) == 1
