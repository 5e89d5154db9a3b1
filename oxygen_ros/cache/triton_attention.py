"""Triton kernels for attention over paged K/V (used on CUDA; tested on CPU under
TRITON_INTERPRET=1 against paged_attention.py).

decode_attention: one query token per sequence, each sequence with its own page table.
suffix_attention: the H action tokens of each chunk attend to their prefix's pages plus
their own dense K/V (the action tier). One program handles one (sequence, kv head, block
of query rows, split of the pages); the query heads that share a kv head are processed
together, so each page of K/V is read once per group. Online softmax in float32.

Split-K (flash-decoding): a page loop is a chain of dependent loads (page id, then K and
V), so one program per (sequence, kv head) walks a 1000-token prefix at memory latency,
not bandwidth — π0.5 has one kv head, so a batch-1 decode step was one program on a
132-SM GPU. The pages are split among programs (enough to fill the GPU; at least
MIN_SPLIT_PAGES each), every split writes its running (max, sum, weighted values), and a
second kernel merges them. The split count follows from the table's width, not the
lengths, so a CUDA graph's launch stays valid as sequences grow.
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
                  stride_kp, stride_ks, stride_kh, first, last, PAGE: tl.constexpr,
                  D: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    """The cached tokens of pages [first, last) (and below `length`)."""
    offs_s = tl.arange(0, PAGE)
    offs_d = tl.arange(0, D)
    for start in range(first * PAGE, tl.minimum(last * PAGE, length), PAGE):
        page = tl.load(table_ptr + start // PAGE).to(tl.int64)
        valid = (start + offs_s) < length
        base = (page * stride_kp + offs_s[:, None] * stride_ks + kv_head * stride_kh
                + offs_d[None, :])
        k = tl.load(k_ptr + base, mask=valid[:, None], other=0.0)
        v = tl.load(v_ptr + base, mask=valid[:, None], other=0.0)
        m_i, l_i, acc = _softmax_block(q, k, v, valid, m_i, l_i, acc, PRECISION, UPCAST)
    return m_i, l_i, acc


@triton.jit
def _finish(m_i, l_i, acc, rows, row_valid, out_ptr, m_ptr, l_ptr, acc_ptr, split,
            SPLITS: tl.constexpr, D: tl.constexpr):
    """Rows of a contiguous [rows, D] output: normalized, or (split-K) this split's running
    max, sum and weighted values for _merge_kernel."""
    offs_d = tl.arange(0, D)
    if SPLITS == 1:
        out = acc / l_i[:, None]
        tl.store(out_ptr + rows[:, None] * D + offs_d[None, :],
                 out.to(out_ptr.dtype.element_ty), mask=row_valid[:, None])
    else:
        slot = rows * SPLITS + split
        tl.store(m_ptr + slot, m_i, mask=row_valid)
        tl.store(l_ptr + slot, l_i, mask=row_valid)
        tl.store(acc_ptr + slot[:, None] * D + offs_d[None, :], acc, mask=row_valid[:, None])


@triton.jit
def _merge_kernel(m_ptr, l_ptr, acc_ptr, out_ptr, num_rows, SPLITS: tl.constexpr,
                  BLOCK_S: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr,
                  D: tl.constexpr):
    """out[r] = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s over the splits of row r; one
    program per block of rows and of head_dim."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    valid = (rows[:, None] < num_rows) & (offs_s[None, :] < SPLITS)
    slot = rows[:, None] * SPLITS + offs_s[None, :]
    m = tl.load(m_ptr + slot, mask=valid, other=float("-inf"))
    l_s = tl.load(l_ptr + slot, mask=valid, other=0.0)
    top = tl.max(m, 1)
    top = tl.where(top == float("-inf"), 0.0, top)      # a row no split saw
    weight = tl.exp(m - top[:, None])
    total = tl.sum(weight * l_s, 1)
    out = tl.zeros([BLOCK_R, BLOCK_D], tl.float32)
    for split in range(SPLITS):
        part = tl.load(acc_ptr + (rows[:, None] * SPLITS + split) * D + offs_d[None, :],
                       mask=rows[:, None] < num_rows, other=0.0)
        m_s = tl.load(m_ptr + rows * SPLITS + split, mask=rows < num_rows,
                      other=float("-inf"))
        out += tl.exp(m_s - top)[:, None] * part
    out = out / tl.where(total > 0, total, 1.0)[:, None]
    tl.store(out_ptr + rows[:, None] * D + offs_d[None, :], out.to(out_ptr.dtype.element_ty),
             mask=rows[:, None] < num_rows)


@triton.jit
def _decode_kernel(q_ptr, k_ptr, v_ptr, tables_ptr, lens_ptr, out_ptr, m_ptr, l_ptr, acc_ptr,
                   scale, num_heads, pages_per_split, stride_qb, stride_qh, stride_kp,
                   stride_ks, stride_kh, stride_tb, GROUP: tl.constexpr,
                   BLOCK_G: tl.constexpr, SPLITS: tl.constexpr, PAGE: tl.constexpr,
                   D: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
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
                                  length, kv_head, stride_kp, stride_ks, stride_kh,
                                  split * pages_per_split, (split + 1) * pages_per_split,
                                  PAGE, D, PRECISION, UPCAST)
    _finish(m_i, l_i, acc, seq * num_heads + heads, in_group, out_ptr, m_ptr, l_ptr, acc_ptr,
            split, SPLITS, D)


@triton.jit
def _suffix_kernel(q_ptr, k_ptr, v_ptr, tables_ptr, lens_ptr, ek_ptr, ev_ptr, out_ptr, m_ptr,
                   l_ptr, acc_ptr, scale, num_tokens, num_heads, row_blocks, pages_per_split,
                   stride_qb, stride_qt, stride_qh, stride_kp, stride_ks, stride_kh,
                   stride_tb, stride_eb, stride_et, stride_eh,
                   GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   SPLITS: tl.constexpr, PAGE: tl.constexpr, D: tl.constexpr,
                   PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    block = tl.program_id(2) % row_blocks
    split = tl.program_id(2) // row_blocks
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)   # (token, head-in-group) pairs
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
                                  length, kv_head, stride_kp, stride_ks, stride_kh,
                                  split * pages_per_split, (split + 1) * pages_per_split,
                                  PAGE, D, PRECISION, UPCAST)
    offs_n = tl.arange(0, BLOCK_N)
    extra = tl.where(split == 0, num_tokens, 0)          # split 0 also takes the dense K/V
    for start in range(0, extra, BLOCK_N):
        valid = (start + offs_n) < num_tokens
        base = (seq * stride_eb + (start + offs_n)[:, None] * stride_et + kv_head * stride_eh
                + offs_d[None, :])
        k = tl.load(ek_ptr + base, mask=valid[:, None], other=0.0)
        v = tl.load(ev_ptr + base, mask=valid[:, None], other=0.0)
        m_i, l_i, acc = _softmax_block(q, k, v, valid, m_i, l_i, acc, PRECISION, UPCAST)
    _finish(m_i, l_i, acc, (seq * num_tokens + token) * num_heads + head, row_valid, out_ptr,
            m_ptr, l_ptr, acc_ptr, split, SPLITS, D)


MIN_SPLIT_PAGES = 4     # pages a split walks at least (fewer: the merge costs more)


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


def _splits(programs: int, width: int, device: torch.device) -> int:
    """Splits of a `width`-page table so that programs × splits fills the device (twice its
    multiprocessors), each split walking at least MIN_SPLIT_PAGES pages."""
    units = torch.cuda.get_device_properties(device).multi_processor_count \
        if device.type == "cuda" else 8
    return max(1, min(-(-2 * units // programs), -(-width // MIN_SPLIT_PAGES)))


def _partials(rows: int, splits: int, head_dim: int, device: torch.device):
    """Each split's running max, sum and weighted values per output row (one dummy float
    when there is one split: the kernel writes its output directly)."""
    if splits == 1:
        empty = torch.empty(1, device=device, dtype=torch.float32)
        return empty, empty, empty
    return (torch.empty(rows * splits, device=device, dtype=torch.float32),
            torch.empty(rows * splits, device=device, dtype=torch.float32),
            torch.empty(rows * splits * head_dim, device=device, dtype=torch.float32))


def _merge(partials, out: torch.Tensor, splits: int) -> None:
    if splits > 1:
        rows, head_dim = out.numel() // out.shape[-1], out.shape[-1]
        block_d = min(64, head_dim)
        _merge_kernel[(triton.cdiv(rows, 4), head_dim // block_d)](
            *partials, out, rows, SPLITS=splits, BLOCK_S=max(16, triton.next_power_of_2(splits)),
            BLOCK_R=4, BLOCK_D=block_d, D=head_dim)


def decode_attention(q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor,
                     block_tables: torch.Tensor, kv_lens: torch.Tensor,
                     scale: float, splits: int = 0) -> torch.Tensor:
    """q [B, Hq, D] -> [B, Hq, D]; sequence b attends to its cached tokens [0, kv_lens[b]).
    splits: how many programs share a sequence's pages (0: enough to fill the device)."""
    page_size, num_kv_heads, head_dim = _check(k_pages)
    batch, num_heads, _ = q.shape
    group = num_heads // num_kv_heads
    q = q.contiguous()
    out = torch.empty_like(q)
    tables = block_tables.to(torch.int32).contiguous()
    lens = kv_lens.to(torch.int32).contiguous()
    width = tables.shape[1]
    splits = splits or _splits(batch * num_kv_heads, width, q.device)
    partials = _partials(batch * num_heads, splits, head_dim, q.device)
    _decode_kernel[(batch, num_kv_heads, splits)](
        q, k_pages, v_pages, tables, lens, out, *partials, scale, num_heads,
        -(-width // splits), q.stride(0), q.stride(1), k_pages.stride(0), k_pages.stride(1),
        k_pages.stride(2), tables.stride(0),
        GROUP=group, BLOCK_G=max(16, triton.next_power_of_2(group)), SPLITS=splits,
        PAGE=page_size, D=head_dim, PRECISION=_precision(q.dtype), UPCAST=_upcast(q.dtype))
    _merge(partials, out, splits)
    return out


def suffix_attention(q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor,
                     block_tables: torch.Tensor, prefix_lens: torch.Tensor,
                     extra_k: torch.Tensor, extra_v: torch.Tensor, scale: float,
                     splits: int = 0) -> torch.Tensor:
    """q [B, T, Hq, D] -> [B, T, Hq, D]: every query sees its prefix's cached tokens
    [0, prefix_lens[b]) and all T dense extra keys/values [B, T, Hkv, D].
    splits: how many programs share a prefix's pages (0: enough to fill the device)."""
    page_size, num_kv_heads, head_dim = _check(k_pages)
    batch, tokens, num_heads, _ = q.shape
    group = num_heads // num_kv_heads
    q, extra_k, extra_v = q.contiguous(), extra_k.contiguous(), extra_v.contiguous()
    out = torch.empty_like(q)
    tables = block_tables.to(torch.int32).contiguous()
    lens = prefix_lens.to(torch.int32).contiguous()
    width = tables.shape[1]
    block_m = 64 if tokens * group >= 64 else 16
    row_blocks = triton.cdiv(tokens * group, block_m)
    splits = splits or _splits(batch * num_kv_heads * row_blocks, width, q.device)
    partials = _partials(batch * tokens * num_heads, splits, head_dim, q.device)
    _suffix_kernel[(batch, num_kv_heads, row_blocks * splits)](
        q, k_pages, v_pages, tables, lens, extra_k, extra_v, out, *partials, scale, tokens,
        num_heads, row_blocks, -(-width // splits),
        q.stride(0), q.stride(1), q.stride(2), k_pages.stride(0), k_pages.stride(1),
        k_pages.stride(2), tables.stride(0), extra_k.stride(0), extra_k.stride(1),
        extra_k.stride(2),
        GROUP=group, BLOCK_M=block_m, BLOCK_N=16, SPLITS=splits, PAGE=page_size, D=head_dim,
        PRECISION=_precision(q.dtype), UPCAST=_upcast(q.dtype))
    _merge(partials, out, splits)
    return out
