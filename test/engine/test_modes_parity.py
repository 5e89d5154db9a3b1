"""isolated, shared_kv and oxygen compute the same actions and the same text."""

import numpy as np
import pytest
from engine_helpers import Events, config, stream

from oxygen_ros.engine.baselines import IsolatedEngine, SharedKVEngine
from oxygen_ros.engine.oxygen import OxygenEngine
from oxygen_ros.model.pi05 import Pi05Model

MODES = (IsolatedEngine, SharedKVEngine, OxygenEngine)


def run(engine_class, model, arrivals, frames, **overrides):
    engine = engine_class(model, config(**overrides))
    events = Events(engine)
    for index, observation in enumerate(frames):
        for text in arrivals.get(index, []):
            engine.submit_dialogue(text)
        engine.step(observation)
    while engine.pending_requests:      # drain requests still in flight
        engine.step(frames[-1])
    return engine, events


@pytest.mark.parametrize("prefix_attention", ["bidirectional", "causal_prompt"])
def test_three_modes_give_the_same_actions_and_identical_greedy_text(tiny_model, prefix_attention):
    model = Pi05Model(tiny_model.config.with_(prefix_attention=prefix_attention), seed=0).eval()
    frames = stream(14, camera_every=2)
    arrivals = {0: ["what is on the table?"], 1: ["hello", "where is the cup?"], 4: ["done?"],
                9: ["describe the scene in detail please"]}
    results = [run(mode, model, arrivals, frames) for mode in MODES]
    reference_chunks = np.stack([c.actions for c in results[0][1].chunks[:14]])
    reference_text = results[0][1].text_by_request()
    assert len(reference_text) == 5 + 2  # five dialogue requests and two memory summaries
    for engine, events in results:
        chunks = np.stack([c.actions for c in events.chunks[:14]])
        np.testing.assert_allclose(chunks, reference_chunks, atol=1e-5, rtol=0)
        assert events.text_by_request() == reference_text, engine.mode
        assert [s.text for s in events.summaries] == [s.text for s in results[0][1].summaries]
        assert all(len(t) > 0 for t in events.text_by_request().values())


def test_oxygen_streams_each_request_in_order_and_finishes_it_once(tiny_model):
    frames = stream(10)
    engine, events = run(OxygenEngine, tiny_model, {0: ["a"], 1: ["b", "c"]}, frames)
    by_request = {}
    for chunk in events.texts:
        by_request.setdefault((chunk.kind, chunk.request_id), []).append(chunk)
    for chunks in by_request.values():
        assert [c.seq for c in chunks] == list(range(len(chunks)))
        assert [c.final for c in chunks] == [False] * (len(chunks) - 1) + [True]
    # with k = 3 tokens per frame a 12-token answer spans several frames
    assert max(c.frame_id for c in events.chunks) >= 3


def test_oxygen_batches_requests_that_started_on_different_frames(tiny_model):
    engine = OxygenEngine(tiny_model, config(memory_period_s=0))
    frames = stream(3)
    engine.submit_dialogue("first")
    engine.step(frames[0])
    engine.submit_dialogue("second")
    engine.step(frames[1])
    running = engine.scheduler.running
    assert len(running) == 2 and {r.frame_id for r in running} == {0, 1}
    assert running[0].table.pages[0] != running[1].table.pages[0]  # each reads its own frame
