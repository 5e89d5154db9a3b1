"""Gemma building blocks: (1 + w) RMSNorm, adaRMS norm, GeGLU MLP, RoPE, decoder layer weights.

Attention itself is not here: the mixture-of-transformers model (pi05.py) computes each
layer's queries, keys and values with these weights and attends jointly over the paged
KV cache.
"""

import torch
import torch.nn.functional as F
from torch import nn

from oxygen_ros.model.config import GemmaConfig


class RMSNorm(nn.Module):
    """Gemma RMSNorm: x / rms(x) * (1 + weight), computed in float32."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor, cond: torch.Tensor | None = None):
        normed = _rms(x, self.eps)
        return (normed * (1.0 + self.weight.float())).to(x.dtype), None


class AdaRMSNorm(nn.Module):
    """Adaptive RMSNorm of the π0.5 action expert: the flow-matching time condition gives
    per-channel scale, shift and a residual gate: (x̂ (1 + scale) + shift, gate)."""

    def __init__(self, dim: int, cond_dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.dense = nn.Linear(cond_dim, 3 * dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor):
        # cond: [batch, cond_dim] -> broadcast over the token axis of x: [batch, tokens, dim];
        # the modulation runs in the dense layer's dtype (float32 in mixed precision)
        modulation = self.dense(cond.to(self.dense.weight.dtype))
        scale, shift, gate = modulation.unsqueeze(-2).chunk(3, dim=-1)
        normed = _rms(x, self.eps)
        return (normed * (1.0 + scale.float()) + shift.float()).to(x.dtype), gate.to(x.dtype)


def _rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class GemmaMLP(nn.Module):
    """GeGLU: down(gelu_tanh(gate(x)) * up(x))."""

    def __init__(self, width: int, mlp_dim: int):
        super().__init__()
        self.gate_proj = nn.Linear(width, mlp_dim, bias=False)
        self.up_proj = nn.Linear(width, mlp_dim, bias=False)
        self.down_proj = nn.Linear(mlp_dim, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class GemmaAttention(nn.Module):
    """Projection weights of one attention layer (multi-query / grouped-query)."""

    def __init__(self, config: GemmaConfig):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = (
            config.num_heads, config.num_kv_heads, config.head_dim)
        self.q_proj = nn.Linear(config.width, config.num_heads * config.head_dim, bias=False)
        self.k_proj = nn.Linear(config.width, config.num_kv_heads * config.head_dim, bias=False)
        self.v_proj = nn.Linear(config.width, config.num_kv_heads * config.head_dim, bias=False)
        self.o_proj = nn.Linear(config.num_heads * config.head_dim, config.width, bias=False)

    def qkv(self, x: torch.Tensor):
        """x: [..., tokens, width] -> q [..., tokens, heads, d], k and v [..., tokens, kv, d]."""
        shape = x.shape[:-1]
        return (self.q_proj(x).view(*shape, self.num_heads, self.head_dim),
                self.k_proj(x).view(*shape, self.num_kv_heads, self.head_dim),
                self.v_proj(x).view(*shape, self.num_kv_heads, self.head_dim))


class GemmaLayer(nn.Module):
    def __init__(self, config: GemmaConfig, cond_dim: int | None, eps: float):
        super().__init__()
        self.self_attn = GemmaAttention(config)
        self.mlp = GemmaMLP(config.width, config.mlp_dim)
        self.input_layernorm = _norm(config.width, cond_dim, eps)
        self.post_attention_layernorm = _norm(config.width, cond_dim, eps)


class Gemma(nn.Module):
    """A decoder stack: layers + final norm (+ token embedding for the VLM).

    With cond_dim set (the action expert) every norm is adaptive (adaRMS)."""

    def __init__(self, config: GemmaConfig, eps: float, vocab_size: int | None = None,
                 cond_dim: int | None = None):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(vocab_size, config.width) if vocab_size else None
        self.layers = nn.ModuleList(GemmaLayer(config, cond_dim, eps) for _ in range(config.depth))
        self.norm = _norm(config.width, cond_dim, eps)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token embeddings scaled by sqrt(width), as Gemma does (image features are not)."""
        scale = torch.tensor(self.config.width ** 0.5, dtype=self.embed_tokens.weight.dtype)
        return self.embed_tokens(tokens) * scale

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Output head tied to the token embedding."""
        normed, _ = self.norm(hidden)
        return normed @ self.embed_tokens.weight.T


def _norm(width: int, cond_dim: int | None, eps: float) -> nn.Module:
    return AdaRMSNorm(width, cond_dim, eps) if cond_dim else RMSNorm(width, eps)


def rope_tables(positions: torch.Tensor, head_dim: int, max_wavelength: float,
                dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) [..., tokens, 1, head_dim / 2] of rotary embedding at these positions,
    computed in float32 once per forward pass and rounded to the activations' dtype, as
    lerobot's pi05 does (every layer rotates q and k with the same tables)."""
    half = head_dim // 2
    exponents = torch.arange(half, device=positions.device, dtype=torch.float32) * 2.0 / head_dim
    inv_timescale = max_wavelength ** -exponents
    radians = positions.to(torch.float32)[..., None, None] * inv_timescale  # [..., T, 1, half]
    return torch.cos(radians).to(dtype), torch.sin(radians).to(dtype)


def rope(x: torch.Tensor, tables: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Rotary embedding, rotate-half form. x: [..., tokens, heads, d]; tables: rope_tables(),
    whose dtype is the one the rotation is computed in (float32 tables: openpi's float32
    rotation of bf16 activations)."""
    cos, sin = tables
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)
