"""A frame whose model call raises ends every open language request at once with
finish_reason engine_error, frees their pages and re-raises; the next frames serve again."""

import pytest
from engine_helpers import Events, config, stream

from oxygen_ros.engine.baselines import IsolatedEngine, SharedKVEngine
from oxygen_ros.engine.oxygen import OxygenEngine


class FailingModel:
    """The real model; the operations named in `failing` raise, as a broken model would."""

    def __init__(self, model):
        self._model, self.failing = model, set()

    def __getattr__(self, name):
        attribute = getattr(self._model, name)
        if name in ("decode", "extend", "sample_actions", "action_inputs"):
            def call(*args, **kwargs):
                if name in self.failing:
                    raise RuntimeError(f"{name}: probability tensor contains nan")
                return attribute(*args, **kwargs)
            return call
        return attribute


def finals(events):
    return {t.request_id: t.finish_reason for t in events.texts if t.final}


@pytest.mark.parametrize("mode", [IsolatedEngine, SharedKVEngine, OxygenEngine])
def test_a_decode_that_raises_ends_the_requests_with_engine_error_and_frees_their_pages(
        tiny_model, mode):
    model = FailingModel(tiny_model)
    engine = mode(model, config(memory_period_s=0))
    events = Events(engine)
    frames = stream(4)
    engine.step(frames[0])
    idle_pages = engine.pages_in_use()
    asked = [engine.submit_dialogue("what do you see?"), engine.submit_dialogue("and now?")]
    model.failing = {"decode"}
    with pytest.raises(RuntimeError, match="nan"):
        engine.step(frames[1])
    assert finals(events) == dict.fromkeys(asked, "engine_error")
    assert engine.pending_requests == 0 and len(engine.scheduler) == 0
    assert engine.pages_in_use() <= idle_pages
    assert engine.counters["failed_frames"] == 1 and engine.counters["failed_requests"] == 2
    assert "RuntimeError" in engine.last_error and "nan" in engine.last_error

    model.failing = set()                      # the model works again: so does the engine
    again = engine.submit_dialogue("what do you see?")
    for frame in frames[2:]:
        engine.step(frame)
    while engine.pending_requests:
        engine.step(frames[-1])
    assert finals(events)[again] == "length"
    assert engine.counters["failed_frames"] == 1


def test_an_action_path_that_raises_ends_waiting_requests_and_keeps_no_pages(tiny_model):
    model = FailingModel(tiny_model)
    engine = OxygenEngine(model, config(memory_period_s=0))
    events = Events(engine)
    asked = engine.submit_dialogue("what do you see?")
    model.failing = {"sample_actions", "action_inputs"}
    with pytest.raises(RuntimeError):
        engine.step(stream(1)[0])
    assert finals(events) == {asked: "engine_error"}
    assert engine.pages_in_use() == 0 and engine.newest is None


def test_an_idle_step_that_raises_ends_its_requests(tiny_model):
    model = FailingModel(tiny_model)
    engine = OxygenEngine(model, config(memory_period_s=0))
    events = Events(engine)
    engine.step(stream(1)[0])
    asked = engine.submit_dialogue("what do you see?")
    model.failing = {"extend", "decode"}
    with pytest.raises(RuntimeError):
        engine.idle_step()
    assert finals(events) == {asked: "engine_error"}
    assert engine.counters["failed_frames"] == 1
