"""A cancel ends a dialogue request, waiting or running, with finish reason 'cancelled'."""

import pytest
from engine_helpers import Events, config, stream

from oxygen_ros.engine.baselines import IsolatedEngine, SharedKVEngine
from oxygen_ros.engine.oxygen import OxygenEngine


def finals(events):
    return {t.request_id: t.finish_reason for t in events.texts if t.final}


@pytest.mark.parametrize("mode", [IsolatedEngine, SharedKVEngine, OxygenEngine])
def test_a_cancel_ends_a_waiting_request_before_it_runs(tiny_model, mode):
    engine = mode(tiny_model, config(memory_period_s=0))
    events = Events(engine)
    cancelled = engine.submit_dialogue("never answered")
    answered = engine.submit_dialogue("hello")
    engine.drain()
    assert len(engine.scheduler.waiting) == 2
    engine.cancel_dialogue(cancelled)
    while engine.pending_requests:
        engine.step(stream(1)[0])
    assert finals(events) == {cancelled: "cancelled", answered: "length"}
    assert [t.text for t in events.texts if t.request_id == cancelled] == [""]
    assert engine.counters["cancelled_requests"] == 1


def test_a_cancel_ends_a_running_request_frees_its_pages_and_a_second_does_nothing(tiny_model):
    engine = OxygenEngine(tiny_model, config(memory_period_s=0))
    events = Events(engine)
    frames = stream(3)
    request = engine.submit_dialogue("what is on the table?")
    report = engine.step(frames[0])
    assert report.active_requests == 1 and request not in finals(events)
    prefix_pages = engine.cache.pages_for(engine.newest[1].num_tokens)
    assert report.pages_in_use > prefix_pages
    engine.cancel_dialogue(request)
    report = engine.step(frames[1])
    assert finals(events) == {request: "cancelled"}
    assert report.active_requests == 0 and report.pages_in_use == prefix_pages
    engine.cancel_dialogue(request)                 # already ended
    engine.step(frames[2])
    assert [t.final for t in events.texts if t.request_id == request].count(True) == 1
    assert engine.counters["cancelled_requests"] == 1
