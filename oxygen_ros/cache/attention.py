"""Chooses the attention implementation by device: Triton kernels on CUDA, the PyTorch
reference elsewhere (CPU), over whole page tables inside torch.compile. All compute the
same function (see test/cache)."""

import torch

from oxygen_ros.cache import paged_attention as reference


def kernels_fit(page_size: int, head_dim: int) -> bool:
    """Whether the Triton kernels take pages of this size and heads of this width."""
    return (page_size >= 16 and head_dim >= 16
            and not page_size & (page_size - 1) and not head_dim & (head_dim - 1))


def _use_triton(q: torch.Tensor, k_pages: torch.Tensor) -> bool:
    return q.is_cuda and kernels_fit(k_pages.shape[1], k_pages.shape[3])


def decode_attention(q, k_pages, v_pages, block_tables, kv_lens, scale):
    """q [B, Hq, D]: one new token per sequence (its own K/V already in the pages)."""
    if _use_triton(q, k_pages):
        from oxygen_ros.cache import triton_attention
        return triton_attention.decode_attention(q, k_pages, v_pages, block_tables, kv_lens,
                                                 scale)
    return reference.paged_attention(q[:, None], k_pages, v_pages, block_tables, kv_lens,
                                     scale, length=_compiled_length(block_tables, k_pages))[:, 0]


def suffix_attention(q, k_pages, v_pages, block_tables, prefix_lens, extra_k, extra_v, scale):
    """q [B, T, Hq, D]: action tokens over their prefix pages plus their own dense K/V."""
    if _use_triton(q, k_pages):
        from oxygen_ros.cache import triton_attention
        return triton_attention.suffix_attention(q, k_pages, v_pages, block_tables,
                                                 prefix_lens, extra_k, extra_v, scale)
    return reference.paged_attention(q, k_pages, v_pages, block_tables, prefix_lens, scale,
                                     extra_k=extra_k, extra_v=extra_v,
                                     length=_compiled_length(block_tables, k_pages))


def _compiled_length(block_tables, k_pages):
    """Inside torch.compile: whole tables (no length leaves the graph); else the longest."""
    return reference.whole_tables(block_tables, k_pages) if torch.compiler.is_compiling() \
        else None
