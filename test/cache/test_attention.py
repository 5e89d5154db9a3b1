"""Attention over pages equals dense attention; the Triton kernels equal the reference."""

import os

import pytest
import torch

from oxygen_ros.cache import paged_attention as reference
from oxygen_ros.cache import triton_attention


def random_layout(seed, batch, lengths, page_size, kv_heads, head_dim, pages=64):
    """Pages filled with noise; each sequence's pages drawn at random (never shared)."""
    g = torch.Generator().manual_seed(seed)
    k_pages = torch.randn(pages, page_size, kv_heads, head_dim, generator=g)
    v_pages = torch.randn(pages, page_size, kv_heads, head_dim, generator=g)
    order = torch.randperm(pages, generator=g).tolist()
    width = max(-(-n // page_size) for n in lengths)
    tables = []
    for n in lengths:
        own = [order.pop() for _ in range(-(-n // page_size))]
        tables.append(own + [0] * (width - len(own)))
    return k_pages, v_pages, torch.tensor(tables, dtype=torch.int32), torch.tensor(lengths), g


def dense_attention(q, k, v, mask, scale):
    """q [T, Hq, D], k/v [L, Hkv, D] -> [T, Hq, D], written out with softmax."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    scores = torch.einsum("thd,lhd->htl", q, k) * scale
    scores = scores.masked_fill(~mask[None], float("-inf"))
    return torch.einsum("htl,lhd->thd", scores.softmax(-1), v)


def dense_sequence(pages, table, length):
    page_size = pages.shape[1]
    return torch.cat([pages[p] for p in table[: -(-length // page_size)].tolist()])[:length]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("page_size, heads, kv_heads", [(4, 8, 1), (16, 4, 2), (8, 6, 6)])
def test_paged_attention_equals_dense_attention_over_random_layouts(seed, page_size, heads,
                                                                    kv_heads):
    gen = torch.Generator().manual_seed(100 + seed)
    batch = int(torch.randint(1, 6, (1,), generator=gen))
    lengths = torch.randint(1, 70, (batch,), generator=gen).tolist()
    tokens = int(torch.randint(1, 5, (1,), generator=gen))
    k_pages, v_pages, tables, lens, g = random_layout(seed, batch, lengths, page_size, kv_heads, 8)
    q = torch.randn(batch, tokens, heads, 8, generator=g)
    extra_k = torch.randn(batch, 3, kv_heads, 8, generator=g)
    extra_v = torch.randn(batch, 3, kv_heads, 8, generator=g)
    causal = torch.rand(batch, tokens, max(lengths), generator=g) > 0.3
    causal[..., 0] = True
    out = reference.paged_attention(q, k_pages, v_pages, tables, lens, 0.35, visible=causal,
                                    extra_k=extra_k, extra_v=extra_v)
    for b, n in enumerate(lengths):
        k = torch.cat([dense_sequence(k_pages, tables[b], n), extra_k[b]])
        v = torch.cat([dense_sequence(v_pages, tables[b], n), extra_v[b]])
        mask = torch.cat([causal[b, :, :n], torch.ones(tokens, 3, dtype=torch.bool)], dim=1)
        torch.testing.assert_close(out[b], dense_attention(q[b], k, v, mask, 0.35),
                                   atol=1e-5, rtol=0)


interpreted = os.environ.get("TRITON_INTERPRET") == "1"
CASES = [(16, 16, 4, 2, [1, 17, 40]), (16, 64, 8, 1, [33, 5]), (32, 16, 2, 2, [64, 3, 90, 31])]


@pytest.mark.parametrize("page_size, head_dim, heads, kv_heads, lengths", CASES)
def test_triton_decode_kernel_equals_the_reference(page_size, head_dim, heads, kv_heads, lengths):
    device = "cpu" if interpreted else "cuda"
    k_pages, v_pages, tables, lens, g = random_layout(1, len(lengths), lengths, page_size,
                                                      kv_heads, head_dim)
    q = torch.randn(len(lengths), heads, head_dim, generator=g)
    expected = reference.paged_attention(q[:, None], k_pages, v_pages, tables, lens, 0.125)[:, 0]
    out = triton_attention.decode_attention(*(t.to(device) for t in (q, k_pages, v_pages, tables,
                                                                      lens)), 0.125)
    torch.testing.assert_close(out.cpu(), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("page_size, head_dim, heads, kv_heads, lengths", CASES)
@pytest.mark.parametrize("tokens", [5, 50])
def test_triton_suffix_kernel_equals_the_reference(page_size, head_dim, heads, kv_heads, lengths,
                                                   tokens):
    device = "cpu" if interpreted else "cuda"
    k_pages, v_pages, tables, lens, g = random_layout(2, len(lengths), lengths, page_size,
                                                      kv_heads, head_dim)
    q = torch.randn(len(lengths), tokens, heads, head_dim, generator=g)
    extra_k = torch.randn(len(lengths), tokens, kv_heads, head_dim, generator=g)
    extra_v = torch.randn(len(lengths), tokens, kv_heads, head_dim, generator=g)
    expected = reference.paged_attention(q, k_pages, v_pages, tables, lens, 0.125,
                                         extra_k=extra_k, extra_v=extra_v)
    out = triton_attention.suffix_attention(
        *(t.to(device) for t in (q, k_pages, v_pages, tables, lens, extra_k, extra_v)), 0.125)
    torch.testing.assert_close(out.cpu(), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("splits", [2, 3, 7])
@pytest.mark.parametrize("dtype, atol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_pages_split_among_programs_merge_to_the_reference(splits, dtype, atol):
    # 7 splits of a 6-page table: some splits see no page, or no page below a length
    device = "cpu" if interpreted else "cuda"
    lengths = [90, 3, 50]
    k_pages, v_pages, tables, lens, g = random_layout(4, 3, lengths, 16, 1, 32)
    q = torch.randn(3, 8, 32, generator=g)
    qs, extra_k, extra_v = (torch.randn(3, 10, h, 32, generator=g) for h in (8, 1, 1))
    cast = [t.to(dtype) for t in (q, k_pages, v_pages, qs, extra_k, extra_v)]
    q, k_pages, v_pages, qs, extra_k, extra_v = [t.float() for t in cast]
    expected = reference.paged_attention(q[:, None], k_pages, v_pages, tables, lens, 0.2)[:, 0]
    expected_suffix = reference.paged_attention(qs, k_pages, v_pages, tables, lens, 0.2,
                                                extra_k=extra_k, extra_v=extra_v)
    q, k_pages, v_pages, qs, extra_k, extra_v = [t.to(device) for t in cast]
    tables, lens = tables.to(device), lens.to(device)
    out = triton_attention.decode_attention(q, k_pages, v_pages, tables, lens, 0.2,
                                            splits=splits)
    torch.testing.assert_close(out.float().cpu(), expected, atol=atol, rtol=0)
    out = triton_attention.suffix_attention(qs, k_pages, v_pages, tables, lens, extra_k, extra_v,
                                            0.2, splits=splits)
    torch.testing.assert_close(out.float().cpu(), expected_suffix, atol=atol, rtol=0)


def test_the_split_count_fills_the_device_but_leaves_each_split_pages_to_walk():
    cpu = torch.device("cpu")         # counted as 8 multiprocessors
    assert triton_attention._splits(programs=1, width=61, device=cpu) == 16
    assert triton_attention._splits(programs=7, width=61, device=cpu) == 3
    assert triton_attention._splits(programs=32, width=61, device=cpu) == 1
    assert triton_attention._splits(programs=1, width=2, device=cpu) == 1


def test_triton_kernels_refuse_page_sizes_they_cannot_tile():
    k_pages = torch.zeros(4, 8, 1, 16)
    with pytest.raises(ValueError, match="page_size a power of two >= 16"):
        triton_attention.decode_attention(torch.zeros(1, 2, 16), k_pages, k_pages,
                                          torch.zeros(1, 1, dtype=torch.int32),
                                          torch.tensor([3]), 1.0)


@pytest.mark.parametrize("page_size, head_dim, heads, kv_heads, lengths", CASES[:2])
def test_triton_kernels_in_bfloat16_match_the_reference_to_bfloat16_rounding(
        page_size, head_dim, heads, kv_heads, lengths):
    device = "cpu" if interpreted else "cuda"
    k_pages, v_pages, tables, lens, g = random_layout(3, len(lengths), lengths, page_size,
                                                      kv_heads, head_dim)
    k_pages, v_pages = k_pages.bfloat16(), v_pages.bfloat16()
    q = torch.randn(len(lengths), heads, head_dim, generator=g).bfloat16()
    expected = reference.paged_attention(q[:, None].float(), k_pages.float(), v_pages.float(),
                                         tables, lens, 0.125)[:, 0]
    out = triton_attention.decode_attention(
        *(t.to(device) for t in (q, k_pages, v_pages, tables, lens)), 0.125)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float().cpu(), expected, atol=3e-2, rtol=0)

    qs = torch.randn(len(lengths), 20, heads, head_dim, generator=g).bfloat16()
    extra_k = torch.randn(len(lengths), 20, kv_heads, head_dim, generator=g).bfloat16()
    extra_v = torch.randn(len(lengths), 20, kv_heads, head_dim, generator=g).bfloat16()
    expected = reference.paged_attention(qs.float(), k_pages.float(), v_pages.float(), tables,
                                         lens, 0.125, extra_k=extra_k.float(),
                                         extra_v=extra_v.float())
    out = triton_attention.suffix_attention(
        *(t.to(device) for t in (qs, k_pages, v_pages, tables, lens, extra_k, extra_v)), 0.125)
    torch.testing.assert_close(out.float().cpu(), expected, atol=3e-2, rtol=0)


@pytest.mark.parametrize("seed", range(3))
def test_whole_table_attention_equals_paged_attention(seed):
    # what compiled passes run: every page of the padded tables, masked past each length
    gen = torch.Generator().manual_seed(200 + seed)
    lengths = torch.randint(1, 70, (3,), generator=gen).tolist()
    k_pages, v_pages, tables, lens, g = random_layout(seed, 3, lengths, 8, 2, 8)
    q = torch.randn(3, 5, 4, 8, generator=g)
    extra_k, extra_v = torch.randn(2, 3, 4, 2, 8, generator=g)
    for extra in ({}, {"extra_k": extra_k, "extra_v": extra_v}):
        torch.testing.assert_close(
            reference.paged_attention(q, k_pages, v_pages, tables, lens, 0.35, **extra,
                                      length=reference.whole_tables(tables, k_pages)),
            reference.paged_attention(q, k_pages, v_pages, tables, lens, 0.35, **extra))
