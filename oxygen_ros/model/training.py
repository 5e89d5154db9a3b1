"""The π0.5 forward for training: the mixture of transformers of pi05.py, dense and
differentiable. One pass holds, per sample, the prefix (camera images and prompt,
bidirectional), text after it (requests and their replies, causal), and the noisy action
chunk (flow matching), each attending as it does at inference: text sees the prefix and
earlier text of its own request, actions see the prefix and each other, never the text.
Several requests pack after one prefix as the engine forks them from one shared prefix:
each starts at the prefix's end and sees only itself. Padding is masked
and positions count only real tokens, so a trained model runs unchanged on the paged
inference path (test/model/test_training.py checks both give the same numbers)."""

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from oxygen_ros.cache.paged_attention import grouped_attention
from oxygen_ros.model.gemma import RMSNorm, rope
from oxygen_ros.model.pi05 import Pi05Model


def initialize(model: Pi05Model, seed: int, std: float = 0.02) -> None:
    """Weights to train from: small normal weights, zero biases, unit norms. The random
    model's own init (sharp attention, for tests of decoding) saturates every softmax,
    which leaves attention without gradient: text never learns to look at the images."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Conv2d, nn.Embedding)):
                nn.init.normal_(module.weight, std=std)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, RMSNorm):
                nn.init.zeros_(module.weight)      # Gemma's gain is 1 + weight
    model.weights_version = f"train-init-seed-{seed}"


@dataclass
class TrainingBatch:
    images: torch.Tensor        # [B, cameras, 3, S, S] in [-1, 1] (every camera present)
    prompt: torch.Tensor        # [B, Lp] token ids, right-padded
    prompt_valid: torch.Tensor  # [B, Lp] bool
    text: torch.Tensor          # [B, Lt] request + reply token ids, right-padded
    text_valid: torch.Tensor    # [B, Lt] bool
    answer: torch.Tensor        # [B, Lt] bool: positions whose token is learned (predicted
                                # from the one before)
    actions: torch.Tensor       # [B, H, action_dim] normalized expert actions
    segment: Optional[torch.Tensor] = None  # [B, Lt] request index of each text token,
                                # non-decreasing along a row (None: one request per row)


def forward(model: Pi05Model, batch: TrainingBatch, x_t: torch.Tensor,
            t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(text logits [B, Lt, vocab], velocity [B, H, action_dim]) for noisy actions x_t at
    flow times t [B]."""
    config = model.config
    b, cameras = batch.images.shape[:2]
    image_tokens = model.embed_images(batch.images.flatten(0, 1)).view(b, -1, config.vlm.width)
    embed = model.language_model.embed
    vlm_x = torch.cat([image_tokens, embed(batch.prompt), embed(batch.text)], dim=1)
    n_img, n_prompt, n_text = image_tokens.shape[1], batch.prompt.shape[1], batch.text.shape[1]
    horizon = x_t.shape[1]
    device = vlm_x.device

    prefix_valid = torch.cat([torch.ones(b, n_img, dtype=torch.bool, device=device),
                              batch.prompt_valid], dim=1)
    prefix_len = prefix_valid.sum(1)                                           # [B]
    prefix_pos = prefix_valid.cumsum(1) - 1
    segment = (batch.segment if batch.segment is not None
               else torch.zeros_like(batch.text)).to(device)
    index = torch.arange(n_text, device=device).expand(b, -1)
    starts = torch.ones_like(segment, dtype=torch.bool)
    starts[:, 1:] = segment[:, 1:] != segment[:, :-1]
    start = torch.where(starts, index, torch.zeros_like(index)).cummax(1).values
    text_pos = prefix_len[:, None] + index - start        # each request starts at the prefix end
    action_pos = prefix_len[:, None] + torch.arange(horizon, device=device)[None]
    positions = torch.cat([prefix_pos, text_pos, action_pos], dim=1)

    # who sees whom: [B, queries, keys] over (prefix, text, actions)
    n_prefix = n_img + n_prompt
    key_prefix = torch.cat([prefix_valid, torch.zeros(b, n_text + horizon, dtype=torch.bool,
                                                      device=device)], dim=1)
    causal = torch.ones(n_text, n_text, dtype=torch.bool, device=device).tril()
    text_sees_text = torch.zeros(b, n_text, n_prefix + n_text + horizon, dtype=torch.bool,
                                 device=device)
    same_request = segment[:, :, None] == segment[:, None, :]
    text_sees_text[:, :, n_prefix:n_prefix + n_text] = (causal & same_request
                                                        & batch.text_valid[:, None, :])
    action_keys = torch.zeros(b, n_prefix + n_text + horizon, dtype=torch.bool, device=device)
    action_keys[:, n_prefix + n_text:] = True
    visible = torch.cat([
        key_prefix[:, None].expand(b, n_prefix, -1),
        key_prefix[:, None] | text_sees_text,
        (key_prefix | action_keys)[:, None].expand(b, horizon, -1)], dim=1)

    cond = model.time_condition(t)
    act_x = model.action_in_proj(x_t.to(model.dtype))
    wavelength = config.rope_max_wavelength
    for vlm_layer, expert_layer in zip(model.language_model.layers, model.expert.layers):
        h_vlm, _ = vlm_layer.input_layernorm(vlm_x)
        h_act, gate_attn = expert_layer.input_layernorm(act_x, cond)
        qv, kv, vv = vlm_layer.self_attn.qkv(h_vlm)
        qa, ka, va = expert_layer.self_attn.qkv(h_act)
        q = rope(torch.cat([qv, qa], dim=1), positions, wavelength)
        k = rope(torch.cat([kv, ka], dim=1), positions, wavelength)
        v = torch.cat([vv, va], dim=1)
        out = grouped_attention(q, k, v, visible, model.scale)
        out_vlm, out_act = out[:, :vlm_x.shape[1]], out[:, vlm_x.shape[1]:]
        vlm_x = vlm_x + vlm_layer.self_attn.o_proj(out_vlm.flatten(-2))
        act_x = act_x + expert_layer.self_attn.o_proj(out_act.flatten(-2)) * gate_attn
        h_vlm, _ = vlm_layer.post_attention_layernorm(vlm_x)
        vlm_x = vlm_x + vlm_layer.mlp(h_vlm)
        h_act, gate_mlp = expert_layer.post_attention_layernorm(act_x, cond)
        act_x = act_x + expert_layer.mlp(h_act) * gate_mlp
    logits = model.language_model.logits(vlm_x[:, n_prefix:])
    normed, _ = model.expert.norm(act_x, cond)
    return logits, model.action_out_proj(normed)


def losses(model: Pi05Model, batch: TrainingBatch, generator: torch.Generator = None
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """(next-token loss over the answers, flow-matching loss over the actions): noise at a
    random time t, x_t = t * noise + (1 - t) * actions, target velocity noise - actions."""
    actions = batch.actions.to(model.dtype)
    noise = torch.randn(actions.shape, generator=generator, dtype=actions.dtype)
    t = torch.rand(actions.shape[0], generator=generator).to(actions.dtype) * 0.999 + 0.001
    x_t = t[:, None, None] * noise + (1 - t[:, None, None]) * actions
    logits, velocity = forward(model, batch, x_t, t)
    # the token at position i is predicted from position i - 1
    predicted = logits[:, :-1].flatten(0, 1)
    targets = batch.text[:, 1:].flatten()
    learned = batch.answer[:, 1:].flatten()
    text_loss = F.cross_entropy(predicted[learned].float(), targets[learned])
    action_loss = F.mse_loss(velocity.float(), (noise - actions).float())
    return text_loss, action_loss
