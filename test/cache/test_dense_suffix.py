"""DenseSuffix (the action tokens' attention on CPU, prefixes gathered once a chunk) equals
the paged reference at every step and layer, whatever the prefix lengths; the model's CPU
denoising goes through it."""

import pytest
import torch
from test_attention import random_layout

from oxygen_ros.cache import paged_attention as reference
from oxygen_ros.cache.dense_suffix import DenseSuffix
from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model


@pytest.mark.parametrize("lengths", [[37], [37, 37], [5, 70, 33], [16, 1, 48, 64]])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_step_and_layer_equals_the_paged_reference(lengths, dtype):
    layers, heads, kv_heads, head_dim, horizon = 2, 4, 2, 8, 5
    # one page layout (same seed for the tables), other noise in each layer's pages
    pools = [random_layout(0, len(lengths), lengths, 8, kv_heads, head_dim)
             for _ in range(layers)]
    k_pages = torch.stack([pool[0] for pool in pools]).to(dtype)
    v_pages = torch.stack([pool[1] for pool in pools]).to(dtype)
    _, _, tables, lens, g = pools[0]
    k_pages[1], v_pages[1] = k_pages[1].flip(0), v_pages[1].flip(0)   # the layers differ
    suffix = DenseSuffix(k_pages, v_pages, tables, lens, horizon, 0.3)
    assert (suffix.mask is None) == (len(set(lengths)) == 1)
    for step in range(3):        # each step overwrites the action K/V of the one before
        for layer in range(layers):
            q = torch.randn(len(lengths), horizon, heads, head_dim, generator=g).to(dtype)
            k = torch.randn(len(lengths), horizon, kv_heads, head_dim, generator=g).to(dtype)
            v = torch.randn(len(lengths), horizon, kv_heads, head_dim, generator=g).to(dtype)
            expected = reference.paged_attention(q, k_pages[layer], v_pages[layer], tables,
                                                 lens, 0.3, extra_k=k, extra_v=v)
            got = suffix.attend(layer, q, k, v)
            tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else {}
            torch.testing.assert_close(got, expected, **tolerance)


def test_the_model_denoises_through_it_on_cpu_and_gets_the_paged_velocity(make_prefix):
    config = preset("tiny")
    model = Pi05Model(config, seed=0).eval()
    cache = KVCache.for_model(config, num_pages=64, page_size=16, action_batch=2)
    prefixes = [make_prefix(config, seed=0, instruction="pick up the red cup"),
                make_prefix(config, seed=1, instruction="wave")]
    tables = model.prefill_many(prefixes, cache)
    x_t = torch.randn(2, config.action_horizon, config.action_dim,
                      generator=torch.Generator().manual_seed(0))
    t = torch.tensor([0.7, 0.7])
    inputs = model.action_inputs(tables, cache)
    with torch.no_grad():
        dense = model.velocity(inputs, x_t, t, cache)
    assert isinstance(inputs.dense, DenseSuffix)
    with torch.enable_grad():     # the vjp guidance's path: the paged reference
        paged = model.velocity(model.action_inputs(tables, cache), x_t, t, cache)
    torch.testing.assert_close(dense, paged.detach(), atol=1e-5, rtol=1e-5)
