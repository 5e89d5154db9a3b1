"""compile_passes: the compiled vision tower, prefill, denoising step and decode step compute
what the eager passes compute, for one sequence and a batch (each new shape compiles)."""

import copy

import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model


def run_passes(model, make_prefix) -> list[torch.Tensor]:
    """K/V of a prefix alone and of two (of different lengths) prefilled as one batch,
    actions for one and for two, and three batched decode steps over the first two (the
    same tokens fed whatever the logits, so the steps compare one by one)."""
    config = model.config
    cache = KVCache.for_model(config, num_pages=64, page_size=16, action_batch=2,
                              dtype=model.dtype)
    prefixes = [make_prefix(config, seed=i, instruction="pick up the cup" + "!" * i)
                for i in range(3)]
    alone = model.prefill(prefixes[0], cache)
    tables = model.prefill_many(prefixes[1:], cache)
    outputs = [torch.stack([cache.pool.k[:, page] for page in table.pages])
               for table in (alone, *tables)]
    noise = torch.randn(2, config.action_horizon, config.action_dim,
                        generator=torch.Generator().manual_seed(0)).to(model.dtype)
    outputs += [model.sample_actions([alone], noise[:1], cache),
                model.sample_actions(tables, noise, cache)]
    decoding = [alone, tables[0]]
    for tokens in ([5, 6], [7, 8], [9, 10]):
        for table in decoding:
            assert cache.reserve(table, 1)
        outputs.append(model.decode(decoding, tokens, cache))
    return [output.float() for output in outputs]


def errors(got: list[torch.Tensor], expected: list[torch.Tensor]) -> list[float]:
    """Largest difference ÷ largest magnitude, per output."""
    return [float((g - e).abs().max() / e.abs().max()) for g, e in zip(got, expected)]


def test_compiled_float32_passes_equal_the_eager_ones(make_prefix):
    eager = Pi05Model(preset("tiny"), seed=0).eval()
    compiled = copy.deepcopy(eager)
    compiled.compile_passes()
    assert not any(p.requires_grad for p in compiled.parameters())
    expected = run_passes(eager, make_prefix)
    assert max(errors(run_passes(compiled, make_prefix), expected)) < 1e-5


def test_compiled_bfloat16_passes_are_as_close_to_float32_as_the_eager_ones(make_prefix):
    reference = Pi05Model(preset("tiny"), seed=0).eval()
    eager = copy.deepcopy(reference).to(torch.bfloat16)
    eager.keep_float32_parts()       # as Pi05Model(dtype=torch.bfloat16)
    compiled = copy.deepcopy(eager)
    compiled.compile_passes()
    expected = run_passes(reference, make_prefix)
    eager_errors = errors(run_passes(eager, make_prefix), expected)
    compiled_errors = errors(run_passes(compiled, make_prefix), expected)
    assert max(eager_errors) < 0.1, eager_errors
    for eager_error, compiled_error in zip(eager_errors, compiled_errors):
        assert compiled_error <= 1.5 * eager_error + 0.01, (eager_errors, compiled_errors)
