"""Attention over paged K/V — the PyTorch reference path (used on CPU, and to test kernels).

Shapes: q [B, T, Hq, D]; the pool's per-layer k_pages / v_pages [P, page_size, Hkv, D];
block_tables [B, max_pages] (int); kv_lens [B]: tokens of each sequence to attend to.
Query head h reads kv head h // (Hq // Hkv) (Gemma's grouping).
"""

from typing import Optional

import torch
import torch.nn.functional as F


def gather(pages: torch.Tensor, block_tables: torch.Tensor, length: int) -> torch.Tensor:
    """Dense [B, length, Hkv, D] view of each sequence's first `length` cached tokens."""
    batch = block_tables.shape[0]
    page_size = pages.shape[1]
    needed = -(-length // page_size)
    dense = pages[block_tables[:, :needed].long()]          # [B, needed, page_size, Hkv, D]
    return dense.reshape(batch, needed * page_size, *pages.shape[2:])[:, :length]


def whole_tables(block_tables: torch.Tensor, pages: torch.Tensor) -> int:
    """Every position the block tables' pages hold."""
    return block_tables.shape[1] * pages.shape[1]


def paged_attention(q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor,
                    block_tables: torch.Tensor, kv_lens: torch.Tensor, scale: float,
                    visible: Optional[torch.Tensor] = None,
                    extra_k: Optional[torch.Tensor] = None,
                    extra_v: Optional[torch.Tensor] = None,
                    length: Optional[int] = None) -> torch.Tensor:
    """softmax(q kᵀ · scale) v over each sequence's cached tokens [0, kv_lens[b]) and,
    when given, extra dense keys/values [B, Te, Hkv, D] that every query sees.

    visible: optional bool [B, T, L] restricting which cached tokens each query sees;
    positions at or beyond kv_lens[b] are never seen. length: the cached positions read,
    L (default max(kv_lens)); torch.compile passes whole_tables(), which reads no length
    back from a tensor (the masked keys add exact zeros).
    """
    batch = q.shape[0]
    length = int(kv_lens.max()) if length is None else length
    keys = gather(k_pages, block_tables, length)
    values = gather(v_pages, block_tables, length)
    # one row per sequence, broadcast over the queries, unless `visible` tells them apart
    mask = torch.arange(length, device=q.device)[None, None, :] < kv_lens[:, None, None]
    if visible is not None:
        mask = mask & visible
    if extra_k is not None:
        keys = torch.cat([keys, extra_k.to(keys.dtype)], dim=1)
        values = torch.cat([values, extra_v.to(values.dtype)], dim=1)
        mask = torch.cat([mask, mask.new_ones(batch, mask.shape[1], extra_k.shape[1])], dim=-1)
    return grouped_attention(q, keys, values, mask, scale)


def grouped_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                      mask: torch.Tensor, scale: float) -> torch.Tensor:
    """q [B, T, Hq, D], keys/values [B, L, Hkv, D], mask [B, T or 1, L] -> [B, T, Hq, D]
    (a mask of one row applies to every query).

    The query heads sharing a kv head are folded into the query axis, so K/V are read
    as they are instead of being copied once per query head."""
    batch, tokens, num_heads, _ = q.shape
    group = num_heads // keys.shape[2]
    if not torch.compiler.is_compiling() and bool(mask.all()):
        attn_mask = None   # everything visible (action tokens, bidirectional prefixes)
    elif mask.shape[1] == 1:
        attn_mask = mask[:, None]
    else:
        mask = mask[:, None, None].expand(batch, 1, group, tokens, mask.shape[-1])
        attn_mask = mask.reshape(batch, 1, group * tokens, -1)
    return folded_attention(q, keys, values, attn_mask, scale)


def folded_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                     attn_mask: Optional[torch.Tensor], scale: float) -> torch.Tensor:
    """grouped_attention with the mask already over the folded query axis: attn_mask
    [B, 1, group * T or 1, L] (bool, or additive in q's dtype) or None (all visible)."""
    batch, tokens, num_heads, head_dim = q.shape
    kv_heads = keys.shape[2]
    group = num_heads // kv_heads
    q = q.view(batch, tokens, kv_heads, group, head_dim).permute(0, 2, 3, 1, 4)
    q = q.reshape(batch, kv_heads, group * tokens, head_dim)
    out = F.scaled_dot_product_attention(
        q, keys.transpose(1, 2), values.transpose(1, 2), attn_mask=attn_mask, scale=scale)
    out = out.view(batch, kv_heads, group, tokens, head_dim).permute(0, 3, 1, 2, 4)
    return out.reshape(batch, tokens, num_heads, head_dim)
