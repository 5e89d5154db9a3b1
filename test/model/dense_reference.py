"""An independent π0.5 forward on a dense, contiguous KV cache, for parity tests.

It reuses the model's weights and small building blocks (norms, projections, RoPE) but
none of the cache, paging, masking or attention code: attention is written out as
softmax(q kᵀ / sqrt(d) + mask) v over concatenated per-layer K/V tensors.
"""

import torch

from oxygen_ros.model.gemma import rope, rope_tables


def attention(q, k, v, mask, scale):
    """q [T, Hq, D], k/v [L, Hkv, D], mask [T, L] bool."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("thd,lhd->htl", q.float(), k.float()) * scale
    scores = scores.masked_fill(~mask[None], float("-inf"))
    return torch.einsum("htl,lhd->thd", scores.softmax(-1), v.float()).to(q.dtype)


class DenseCache:
    """Per-layer K/V [L, Hkv, D], grown by concatenation."""

    def __init__(self, num_layers):
        self.k = [None] * num_layers
        self.v = [None] * num_layers

    def append(self, layer, k, v):
        self.k[layer] = k if self.k[layer] is None else torch.cat([self.k[layer], k])
        self.v[layer] = v if self.v[layer] is None else torch.cat([self.v[layer], v])
        return self.k[layer], self.v[layer]

    @property
    def length(self):
        return 0 if self.k[0] is None else self.k[0].shape[0]

    def copy(self):
        other = DenseCache(len(self.k))
        other.k, other.v = list(self.k), list(self.v)
        return other


@torch.inference_mode()
def vlm_forward(model, cache, x, causal_flags):
    """Run VLM tokens x [T, W] after `cache.length` cached tokens; causal_flags [T] say which
    new tokens are causal (the cached ones are all visible to the new ones)."""
    cfg = model.config
    start, count = cache.length, x.shape[0]
    positions = torch.arange(start, start + count)
    tables = rope_tables(positions[None], cfg.vlm.head_dim, cfg.rope_max_wavelength, x.dtype)
    new = torch.arange(count)
    mask_new = (~causal_flags[None, :]) | (new[None, :] <= new[:, None])
    mask = torch.cat([torch.ones(count, start, dtype=torch.bool), mask_new], dim=1)
    for i, layer in enumerate(model.language_model.layers):
        h, _ = layer.input_layernorm(x)
        q, k, v = layer.self_attn.qkv(h)
        q = rope(q[None], tables)[0]
        k = rope(k[None], tables)[0]
        keys, values = cache.append(i, k, v)
        x = x + layer.self_attn.o_proj(attention(q, keys, values, mask, model.scale).flatten(-2))
        h, _ = layer.post_attention_layernorm(x)
        x = x + layer.mlp(h)
    return x


def prefill(model, prefix):
    cache = DenseCache(model.config.num_layers)
    vlm_forward(model, cache, model.embed_prefix(prefix), prefix.causal(model.config.prefix_attention))
    return cache


@torch.inference_mode()
def sample_actions(model, cache, noise):
    """noise [H, A] -> actions [H, A] by Euler steps, attending to the dense prefix cache."""
    cfg = model.config
    steps = cfg.num_denoise_steps
    dt = -1.0 / steps
    prefix_len = cache.length
    horizon = noise.shape[0]
    positions = prefix_len + torch.arange(horizon)
    tables = rope_tables(positions[None], cfg.vlm.head_dim, cfg.rope_max_wavelength,
                         noise.dtype)
    mask = torch.ones(horizon, prefix_len + horizon, dtype=torch.bool)
    x_t = noise.clone()
    for step in range(steps):
        t = torch.tensor([1.0 + step * dt])
        cond = model.time_condition(t)
        x = model.action_in_proj(x_t)[None]
        for i, layer in enumerate(model.expert.layers):
            h, gate = layer.input_layernorm(x, cond)
            q, k, v = layer.self_attn.qkv(h[0])
            q = rope(q[None], tables)[0]
            k = rope(k[None], tables)[0]
            keys = torch.cat([cache.k[i], k])
            values = torch.cat([cache.v[i], v])
            out = attention(q, keys, values, mask, model.scale)
            x = x + layer.self_attn.o_proj(out.flatten(-2))[None] * gate
            h, gate = layer.post_attention_layernorm(x, cond)
            x = x + layer.mlp(h) * gate
        normed, _ = model.expert.norm(x, cond)
        x_t = x_t + dt * model.action_out_proj(normed)[0]
    return x_t


@torch.inference_mode()
def greedy(model, cache, prompt_tokens, count):
    """Extend the cache with prompt tokens (causal), then decode `count` tokens greedily."""
    x = model.language_model.embed(torch.tensor(prompt_tokens))
    hidden = vlm_forward(model, cache, x, torch.ones(len(prompt_tokens), dtype=torch.bool))
    out = []
    for _ in range(count):
        token = int(model.language_model.logits(hidden[-1]).argmax())
        out.append(token)
        x = model.language_model.embed(torch.tensor([token]))
        hidden = vlm_forward(model, cache, x, torch.ones(1, dtype=torch.bool))
    return out
