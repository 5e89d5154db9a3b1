"""Triton kernels for attention over paged K/V (used on CUDA; tested on CPU under
TRITON_INTERPRET=1 against paged_attention.py).

decode_attention: one query token per sequence, each sequence with its own page table.
suffix_attention: the H action tokens of each chunk attend to their prefix's pages plus
their own dense K/V (the action tier). One program handles one (sequence, kv head, block
of query rows); the query heads that share a kv head are processed together, so each
page of K/V is read once per group. Online softmax in float32.
"""

import os

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_block(q, k, v, valid, m_i, l_i, acc, PRECISION: tl.constexpr,
                   UPCAST: tl.constexpr):
    """One block of keys/values into the running (max, sum, weighted values) of each row.
    UPCAST: dot in float32 (the interpreter cannot dot bfloat16; values keep their
    bfloat16 rounding, so results match a GPU's bfloat16 dots to rounding)."""
    k = tl.trans(k).to(q.dtype)
    p_dtype = v.dtype
    if UPCAST:
        q, k, v = q.to(tl.float32), k.to(tl.float32), v.to(tl.float32)
    s = tl.dot(q, k, input_precision=PRECISION)
    s = tl.where(valid[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.exp(s - m_new[:, None])
    alpha = tl.exp(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(p_dtype).to(v.dtype), v, input_precision=PRECISION)
    return m_new, l_i, acc


@triton.jit
def _attend_pages(q, m_i, l_i, acc, k_ptr, v_ptr, table_ptr, length, kv_head,
                  stride_kp, stride_ks, stride_kh, PAGE: tl.constexpr, D: tl.constexpr,
                  PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    offs_s = tl.arange(0, PAGE)
    offs_d = tl.arange(0, D)
    for start in range(0, length, PAGE):
        page = tl.load(table_ptr + start // PAGE).to(tl.int64)
        valid = (start + offs_s) < length
        base = (page * stride_kp + offs_s[:, None] * stride_ks + kv_head * stride_kh
                + offs_d[None, :])
        k = tl.load(k_ptr + base, mask=valid[:, None], other=0.0)
        v = tl.load(v_ptr + base, mask=valid[:, None], other=0.0)
        m_i, l_i, acc = _softmax_block(q, k, v, valid, m_i, l_i, acc, PRECISION, UPCAST)
    return m_i, l_i, acc


@triton.jit
def _decode_kernel(q_ptr, k_ptr, v_ptr, tables_ptr, lens_ptr, out_ptr, scale,
                   stride_qb, stride_qh, stride_kp, stride_ks, stride_kh, stride_tb,
                   stride_ob, stride_oh, GROUP: tl.constexpr, BLOCK_G: tl.constexpr,
                   PAGE: tl.constexpr, D: tl.constexpr, PRECISION: tl.constexpr,
                   UPCAST: tl.constexpr):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    heads = kv_head * GROUP + offs_g
    in_group = offs_g < GROUP
    q = tl.load(q_ptr + seq * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
                mask=in_group[:, None], other=0.0)
    q = (q.to(tl.float32) * scale).to(q.dtype)
    length = tl.load(lens_ptr + seq)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    m_i, l_i, acc = _attend_pages(q, m_i, l_i, acc, k_ptr, v_ptr, tables_ptr + seq * stride_tb,
                                  length, kv_head, stride_kp, stride_ks, stride_kh, PAGE, D,
                                  PRECISION, UPCAST)
    out = acc / l_i[:, None]
    tl.store(out_ptr + seq * stride_ob + heads[:, None] * stride_oh + offs_d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=in_group[:, None])


@triton.jit
def _suffix_kernel(q_ptr, k_ptr, v_ptr, tables_ptr, lens_ptr, ek_ptr, ev_ptr, out_ptr, scale,
                   num_tokens, stride_qb, stride_qt, stride_qh, stride_kp, stride_ks, stride_kh,
                   stride_tb, stride_eb, stride_et, stride_eh, stride_ob, stride_ot, stride_oh,
                   GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   PAGE: tl.constexpr, D: tl.constexpr, PRECISION: tl.constexpr,
                   UPCAST: tl.constexpr):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    rows = tl.program_id(2) * BLOCK_M + tl.arange(0, BLOCK_M)   # (token, head-in-group) pairs
    token = rows // GROUP
    head = kv_head * GROUP + rows % GROUP
    row_valid = token < num_tokens
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + seq * stride_qb + token[:, None] * stride_qt + head[:, None] * stride_qh
                + offs_d[None, :], mask=row_valid[:, None], other=0.0)
    q = (q.to(tl.float32) * scale).to(q.dtype)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    length = tl.load(lens_ptr + seq)
    m_i, l_i, acc = _attend_pages(q, m_i, l_i, acc, k_ptr, v_ptr, tables_ptr + seq * stride_tb,
                                  length, kv_head, stride_kp, stride_ks, stride_kh, PAGE, D,
                                  PRECISION, UPCAST)
    offs_n = tl.arange(0, BLOCK_N)
    for start in range(0, num_tokens, BLOCK_N):
        valid = (start + offs_n) < num_tokens
        base = (seq * stride_eb + (start + offs_n)[:, None] * stride_et + kv_head * stride_eh
                + offs_d[None, :])
        k = tl.load(ek_ptr + base, mask=valid[:, None], other=0.0)
        v = tl.load(ev_ptr + base, mask=valid[:, None], other=0.0)
        m_i, l_i, acc = _softmax_block(q, k, v, valid, m_i, l_i, acc, PRECISION, UPCAST)
    out = acc / l_i[:, None]
    tl.store(out_ptr + seq * stride_ob + token[:, None] * stride_ot + head[:, None] * stride_oh
             + offs_d[None, :], out.to(out_ptr.dtype.element_ty), mask=row_valid[:, None])


def _precision(dtype: torch.dtype) -> str:
    # fp32 stays exact (no TF32) so kernel and reference agree to 1e-5.
    return "ieee" if dtype == torch.float32 else "tf32"


def _upcast(dtype: torch.dtype) -> bool:
    return dtype != torch.float32 and os.environ.get("TRITON_INTERPRET") == "1"


def _check(k_pages: torch.Tensor) -> tuple[int, int, int]:
    _, page_size, num_kv_heads, head_dim = k_pages.shape
    for name, value in (("page_size", page_size), ("head_dim", head_dim)):
        if value < 16 or value & (value - 1):
            raise ValueError(f"Triton attention needs {name} a power of two >= 16, got {value}")
    if k_pages.stride(-1) != 1:
        raise ValueError("K/V pages must be contiguous in head_dim")
    return page_size, num_kv_heads, head_dim


def decode_attention(q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor,
                     block_tables: torch.Tensor, kv_lens: torch.Tensor,
                     scale: float) -> torch.Tensor:
    """q [B, Hq, D] -> [B, Hq, D]; sequence b attends to its cached tokens [0, kv_lens[b])."""
    page_size, num_kv_heads, head_dim = _check(k_pages)
    batch, num_heads, _ = q.shape
    group = num_heads // num_kv_heads
    q = q.contiguous()
    out = torch.empty_like(q)
    tables = block_tables.to(torch.int32).contiguous()
    lens = kv_lens.to(torch.int32).contiguous()
    _decode_kernel[(batch, num_kv_heads)](
        q, k_pages, v_pages, tables, lens, out, scale,
        q.stride(0), q.stride(1), k_pages.stride(0), k_pages.stride(1), k_pages.stride(2),
        tables.stride(0), out.stride(0), out.stride(1),
        GROUP=group, BLOCK_G=max(16, triton.next_power_of_2(group)), PAGE=page_size,
        D=head_dim, PRECISION=_precision(q.dtype), UPCAST=_upcast(q.dtype))
    return out


def suffix_attention(q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor,
                     block_tables: torch.Tensor, prefix_lens: torch.Tensor,
                     extra_k: torch.Tensor, extra_v: torch.Tensor, scale: float) -> torch.Tensor:
    """q [B, T, Hq, D] -> [B, T, Hq, D]: every query sees its prefix's cached tokens
    [0, prefix_lens[b]) and all T dense extra keys/values [B, T, Hkv, D]."""
    page_size, num_kv_heads, head_dim = _check(k_pages)
    batch, tokens, num_heads, _ = q.shape
    group = num_heads // num_kv_heads
    q, extra_k, extra_v = q.contiguous(), extra_k.contiguous(), extra_v.contiguous()
    out = torch.empty_like(q)
    tables = block_tables.to(torch.int32).contiguous()
    lens = prefix_lens.to(torch.int32).contiguous()
    block_m = 64 if tokens * group >= 64 else 16
    grid = (batch, num_kv_heads, triton.cdiv(tokens * group, block_m))
    _suffix_kernel[grid](
        q, k_pages, v_pages, tables, lens, extra_k, extra_v, out, scale, tokens,
        q.stride(0), q.stride(1), q.stride(2), k_pages.stride(0), k_pages.stride(1),
        k_pages.stride(2), tables.stride(0), extra_k.stride(0), extra_k.stride(1),
        extra_k.stride(2), out.stride(0), out.stride(1), out.stride(2),
        GROUP=group, BLOCK_M=block_m, BLOCK_N=16, PAGE=page_size, D=head_dim,
        PRECISION=_precision(q.dtype), UPCAST=_upcast(q.dtype))
    return out
