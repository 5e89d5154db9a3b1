"""torch_compile on a CPU: the engine compiles the model's passes while it calibrates,
serves what the eager engine serves, and afterwards runs a shape no graph covers eagerly
(counted) instead of compiling in the middle of a run."""

import copy

import numpy as np
import torch
from engine_helpers import Events, config, stream

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.engine.oxygen import OxygenEngine


def serve(model, **overrides):
    engine = OxygenEngine(model, config(**overrides))
    events = Events(engine)
    frames = stream(10, camera_every=2)
    arrivals = {0: ["what is on the table?"], 1: ["hello", "where is the cup?"], 5: ["done?"]}
    for index, observation in enumerate(frames):
        for text in arrivals.get(index, []):
            engine.submit_dialogue(text)
        engine.step(observation)
    while engine.pending_requests:
        engine.step(frames[-1])
    return engine, events


def test_compiled_engine_serves_what_the_eager_one_does_and_never_compiles_mid_run(
        tiny_model, make_prefix):
    eager_engine, eager = serve(copy.deepcopy(tiny_model))
    engine, compiled = serve(copy.deepcopy(tiny_model), torch_compile=True)
    model = engine.model
    assert set(model.compiled_passes) == {"embed_images", "_dense_prefill", "velocity",
                                          "decode_step"}
    assert all(p.settled for p in model.compiled_passes.values())
    np.testing.assert_allclose(np.stack([c.actions for c in compiled.chunks]),
                               np.stack([c.actions for c in eager.chunks]), atol=1e-5, rtol=0)
    assert compiled.text_by_request() == eager.text_by_request()
    assert len(compiled.text_by_request()) == 4 + 1     # four answers, one summary
    assert [s.text for s in compiled.summaries] == [s.text for s in eager.summaries]
    assert model.eager_calls == 0, {n: p.eager_calls for n, p in model.compiled_passes.items()}

    # two robots' chunks in one pass: batches the single robot's calibration never compiled
    cache = KVCache.for_model(model.config, num_pages=64, action_batch=2)
    prefixes = [make_prefix(model.config, seed=seed) for seed in (3, 4)]
    noise = torch.randn(2, model.config.action_horizon, model.config.action_dim,
                        generator=torch.Generator().manual_seed(1))
    expected = eager_engine.model.sample_actions(
        eager_engine.model.prefill_many(prefixes, cache), noise, cache)
    got = model.sample_actions(model.prefill_many(prefixes, cache, reuse=False), noise, cache)
    # the batched prefill, and every denoising step, ran eager: none compiled
    assert model.eager_calls >= 1 + model.config.num_denoise_steps
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
