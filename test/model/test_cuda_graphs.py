"""The CUDA-graph runners' bookkeeping, on the CPU: buckets, static buffers padded with a
scratch page, and the eager run of that static path equal to the plain decode and
denoising (capture itself needs a GPU: tools/gpu_check.py checks it there)."""

import numpy as np
import pytest
import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model.cuda_graphs import CudaGraphs, bucket_for


def test_a_batch_goes_to_the_smallest_bucket_that_holds_it():
    assert [bucket_for(n) for n in (1, 2, 3, 4, 5, 9, 32)] == [1, 2, 4, 4, 8, 16, 32]
    assert bucket_for(33) is None and bucket_for(3, (8, 2)) == 8


def caches_with_sequences(model, make_prefix, lengths):
    """Two identical caches holding the same sequences (prefix + `n` extra tokens each)."""
    caches, tables = [], []
    for _ in range(2):
        cache = KVCache.for_model(model.config, num_pages=64, page_size=16)
        rows = []
        for i, extra in enumerate(lengths):
            table = model.prefill(make_prefix(model.config, seed=i), cache)
            assert cache.reserve(table, extra + 4)
            model.extend(table, list(range(3, 3 + extra)), cache)
            rows.append(table)
        caches.append(cache)
        tables.append(rows)
    return caches, tables


def test_padded_static_decode_equals_the_plain_decode_and_keeps_padding_off_real_pages(
        tiny_model, make_prefix):
    (plain, graphed), (plain_tables, graphed_tables) = caches_with_sequences(
        tiny_model, make_prefix, [1, 7, 20])
    graphs = CudaGraphs(tiny_model, graphed, max_tokens=200, buckets=(1, 4), capture=False)
    scratch = graphs.scratch_page
    for table in plain_tables + graphed_tables:
        assert scratch not in table.pages
    for tables, cache in ((plain_tables, plain), (graphed_tables, graphed)):
        for table in tables:
            assert cache.reserve(table, 1)
    tokens = [11, 12, 13]
    expected = tiny_model.decode(plain_tables, tokens, plain)
    tiny_model.graphs = graphs
    try:
        inputs = tiny_model.decode_inputs(graphed_tables, tokens, graphed)
        runner = graphs.decode_runner(graphed, inputs)
        assert runner is graphs.decode[4]                     # 3 rows -> bucket 4
        got = tiny_model.decode(graphed_tables, tokens, graphed)
    finally:
        tiny_model.graphs = None
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    static = runner.static
    assert static.tokens.tolist()[3:] == [0] and static.positions.tolist()[3:] == [0]
    assert static.slots[3].item() == scratch * graphed.page_size
    assert (static.block_tables[3] == scratch).all()
    # every real page holds the same K/V in both caches: padding wrote only to the scratch page
    for table_a, table_b in zip(plain_tables, graphed_tables):
        assert [t.length for t in (table_a, table_b)] == [table_a.length] * 2
        for page_a, page_b in zip(table_a.pages, table_b.pages):
            torch.testing.assert_close(graphed.pool.k[:, page_b], plain.pool.k[:, page_a])


def test_batches_and_sequences_beyond_the_runners_fall_back_to_eager(tiny_model, make_prefix):
    (_, cache), (_, tables) = caches_with_sequences(tiny_model, make_prefix, [1, 2, 3])
    graphs = CudaGraphs(tiny_model, cache, max_tokens=64, buckets=(1, 2), capture=False)
    for table in tables:
        assert cache.reserve(table, 1)
    assert graphs.decode_runner(cache, tiny_model.decode_inputs(tables, [1, 2, 3], cache)) is None
    other = KVCache.for_model(tiny_model.config, num_pages=8, page_size=16)
    assert graphs.decode_runner(other, tiny_model.decode_inputs(tables[:1], [1], cache)) is None
    long_prefix = make_prefix(tiny_model.config, seed=9, instruction="x" * 60)
    table = tiny_model.prefill(long_prefix, cache)
    assert cache.reserve(table, 40)
    tiny_model.extend(table, list(range(3, 43)), cache)
    assert cache.reserve(table, 1)
    inputs = tiny_model.decode_inputs([table], [1], cache)
    assert inputs.block_tables.shape[1] > graphs.max_pages
    assert graphs.decode_runner(cache, inputs) is None


def test_static_denoising_equals_the_plain_sampler(tiny_model, make_prefix):
    cache = KVCache.for_model(tiny_model.config, num_pages=64, page_size=16)
    table = tiny_model.prefill(make_prefix(tiny_model.config, seed=3), cache)
    noise = torch.randn(1, tiny_model.config.action_horizon, tiny_model.config.action_dim,
                        generator=torch.Generator().manual_seed(0))
    expected = tiny_model.sample_actions([table], noise, cache)
    graphs = CudaGraphs(tiny_model, cache, max_tokens=200, buckets=(1,), capture=False)
    tiny_model.graphs = graphs
    try:
        assert graphs.action_runner(cache, tiny_model.action_inputs([table], cache)) is not None
        got = tiny_model.sample_actions([table], noise, cache)
    finally:
        tiny_model.graphs = None
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)
    assert np.isfinite(got.numpy()).all()


def test_pages_the_kernels_do_not_take_are_refused_before_any_capture(tiny_model):
    """The reference attention reads lengths back to the host, which a CUDA graph cannot
    hold: a page size the Triton kernels do not take is an error naming the way out."""
    cache = KVCache.for_model(tiny_model.config, num_pages=16, page_size=24)
    with pytest.raises(ValueError, match="page_size 24 .* cuda_graphs: false"):
        CudaGraphs(tiny_model, cache, max_tokens=64, buckets=(1,), capture=True)
    assert cache.pool.used_pages == 0        # nothing allocated
    CudaGraphs(tiny_model, cache, max_tokens=64, buckets=(1,), capture=False)
