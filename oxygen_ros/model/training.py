"""The π0.5 forward for training: the mixture of transformers of pi05.py, dense and
differentiable. One pass holds, per sample, the prefix (camera images and prompt,
bidirectional), text after it (requests and their replies, causal), and the noisy action
chunk (flow matching), each attending as it does at inference: text sees the prefix and
earlier text of its own request, actions see the prefix and each other, never the text.
Several requests pack after one prefix as the engine forks them from one shared prefix:
each starts at the prefix's end and sees only itself, and its attention runs over the
prefix and itself only (request_rows), not over the whole packed row (the demo packs
~10 requests per frame). Padding is masked
and positions count only real tokens, so a trained model runs unchanged on the paged
inference path (test/model/test_training.py checks both give the same numbers)."""

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from oxygen_ros.cache.paged_attention import grouped_attention
from oxygen_ros.model.gemma import RMSNorm, rope, rope_tables
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
    look: Optional[torch.Tensor] = None     # [B, Lt, n_prefix] bool: the prefix tokens
                                # that the last layer's first head is taught to attend to
                                # from each text position (an empty row: no teaching)


@dataclass
class RequestRows:
    """Text requests of one padded length, one per row: where each row's tokens lie in
    the flattened text [B * Lt], which are real, and whose prefix they follow."""
    index: torch.Tensor     # [n, L] positions in the flattened text (padding repeats one)
    valid: torch.Tensor     # [n, L] bool
    sample: torch.Tensor    # [n] the batch row (prefix) of each request


def request_rows(segment: torch.Tensor, text_valid: torch.Tensor, multiple: int = 16
                 ) -> list[RequestRows]:
    """The requests packed in each row of the text, grouped by their length rounded up to
    `multiple`: attention runs per group, each request over its prefix and itself only,
    instead of over every text token of the row."""
    lt = segment.shape[1]
    found = {}
    for row in range(segment.shape[0]):
        n = int(text_valid[row].sum())
        seg = segment[row, :n]
        cuts = [0, *(torch.nonzero(seg[1:] != seg[:-1]).flatten() + 1).tolist(), n]
        for a, e in zip(cuts, cuts[1:]):
            found.setdefault(-(-(e - a) // multiple) * multiple, []).append((row, a, e))
    groups = []
    for width, requests in sorted(found.items()):
        offsets = torch.arange(width)
        starts = torch.tensor([row * lt + a for row, a, _ in requests])
        lengths = torch.tensor([e - a for _, a, e in requests])
        valid = offsets[None] < lengths[:, None]
        index = torch.where(valid, starts[:, None] + offsets[None], starts[:, None])
        groups.append(RequestRows(index, valid, torch.tensor([r for r, _, _ in requests])))
    return groups


@dataclass
class _Layout:
    """Who sees whom in one pass: the prefix itself; actions the prefix and each other;
    each request the prefix and its own earlier tokens (causal), never the other
    requests."""
    n_prefix: int
    n_text: int
    horizon: int
    prefix_sees: torch.Tensor       # [B, n_prefix, n_prefix]
    action_sees: torch.Tensor       # [B, 1, n_prefix + horizon]
    rows: list                      # RequestRows groups
    row_sees: list                  # per group [n, L, n_prefix + L]


def _positions(prefix_valid: torch.Tensor, segment: torch.Tensor, horizon: int
               ) -> torch.Tensor:
    """Rotary positions of (prefix, text, actions): real tokens only; each request and
    the action chunk start at the prefix's end."""
    b, n_text = segment.shape
    device = segment.device
    prefix_len = prefix_valid.sum(1)                                           # [B]
    prefix_pos = prefix_valid.cumsum(1) - 1
    index = torch.arange(n_text, device=device).expand(b, -1)
    starts = torch.ones_like(segment, dtype=torch.bool)
    starts[:, 1:] = segment[:, 1:] != segment[:, :-1]
    start = torch.where(starts, index, torch.zeros_like(index)).cummax(1).values
    text_pos = prefix_len[:, None] + index - start
    action_pos = prefix_len[:, None] + torch.arange(horizon, device=device)[None]
    return torch.cat([prefix_pos, text_pos, action_pos], dim=1)


def _layout(prefix_valid: torch.Tensor, segment: torch.Tensor, text_valid: torch.Tensor,
            horizon: int) -> _Layout:
    b, n_prefix = prefix_valid.shape
    device = prefix_valid.device
    action_sees = torch.cat([prefix_valid, torch.ones(b, horizon, dtype=torch.bool,
                                                      device=device)], 1)[:, None]
    rows = request_rows(segment, text_valid)
    row_sees = []
    for group in rows:
        width = group.index.shape[1]
        causal = torch.ones(width, width, dtype=torch.bool, device=device).tril()
        row_sees.append(torch.cat([
            prefix_valid[group.sample][:, None].expand(-1, width, -1),
            causal[None] & group.valid[:, None, :]], dim=2))
    return _Layout(n_prefix, segment.shape[1], horizon,
                   prefix_valid[:, None].expand(b, n_prefix, -1), action_sees, rows, row_sees)


def _attend(model: Pi05Model, layout: _Layout, q, k, v, look: Optional[torch.Tensor]):
    """q, k, v over (prefix, text, actions) [B, N, heads, D] -> ([B, N, Hq, D], the share
    [B * Lt] of the first head's attention on look's tokens, or None without look)."""
    split = [layout.n_prefix, layout.n_text, layout.horizon]
    (qp, qt, qa), (kp, kt, ka), (vp, vt, va) = (x.split(split, dim=1) for x in (q, k, v))
    out_prefix = grouped_attention(qp, kp, vp, layout.prefix_sees, model.scale)
    out_actions = grouped_attention(qa, torch.cat([kp, ka], 1), torch.cat([vp, va], 1),
                                    layout.action_sees.expand(-1, layout.horizon, -1),
                                    model.scale)
    flat = qt.flatten(0, 1), kt.flatten(0, 1), vt.flatten(0, 1)
    out_text = torch.zeros_like(flat[0])
    looked = torch.zeros(flat[0].shape[0], device=q.device) if look is not None else None
    for group, sees in zip(layout.rows, layout.row_sees):
        keys = torch.cat([kp[group.sample], flat[1][group.index]], 1)
        values = torch.cat([vp[group.sample], flat[2][group.index]], 1)
        out = grouped_attention(flat[0][group.index], keys, values, sees, model.scale)
        out_text = out_text.index_copy(0, group.index[group.valid], out[group.valid])
        if look is not None:   # query head 0 reads kv head 0
            scores = flat[0][group.index][:, :, 0] @ keys[:, :, 0].transpose(1, 2)
            weights = (scores.float() * model.scale).masked_fill(~sees, -torch.inf)
            on = look.flatten(0, 1)[group.index]
            mass = (weights.softmax(-1)[..., :layout.n_prefix] * on).sum(-1)
            looked = looked.index_copy(0, group.index[group.valid], mass[group.valid])
    return torch.cat([out_prefix, out_text.view_as(qt), out_actions], dim=1), looked


def forward(model: Pi05Model, batch: TrainingBatch, x_t: torch.Tensor,
            t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(text logits [B, Lt, vocab], velocity [B, H, action_dim]) for noisy actions x_t at
    flow times t [B]; with batch.look also the share [B, Lt] of the last layer's first
    head's attention that falls on those tokens. Padded text positions attend to nothing."""
    config = model.config
    b, cameras = batch.images.shape[:2]
    image_tokens = model.embed_images(batch.images.flatten(0, 1)).view(b, -1, config.vlm.width)
    embed = model.language_model.embed
    vlm_x = torch.cat([image_tokens, embed(batch.prompt), embed(batch.text)], dim=1)
    device = vlm_x.device
    prefix_valid = torch.cat([torch.ones(b, image_tokens.shape[1], dtype=torch.bool,
                                         device=device), batch.prompt_valid], dim=1)
    segment = (batch.segment if batch.segment is not None
               else torch.zeros_like(batch.text)).to(device)
    positions = _positions(prefix_valid, segment, x_t.shape[1])
    layout = _layout(prefix_valid, segment, batch.text_valid, x_t.shape[1])
    looked = None

    cond = model.time_condition(t)
    act_x = model.embed_actions(x_t)
    tables = rope_tables(positions, config.vlm.head_dim, config.rope_max_wavelength,
                         torch.float32)
    layers = list(zip(model.language_model.layers, model.expert.layers))
    for depth, (vlm_layer, expert_layer) in enumerate(layers):
        h_vlm, _ = vlm_layer.input_layernorm(vlm_x)
        h_act, gate_attn = expert_layer.input_layernorm(act_x, cond)
        qv, kv, vv = vlm_layer.self_attn.qkv(h_vlm)
        qa, ka, va = expert_layer.self_attn.qkv(h_act)
        q = rope(torch.cat([qv, qa], dim=1), tables)
        k = rope(torch.cat([kv, ka], dim=1), tables)
        last = depth == len(layers) - 1
        out, mass = _attend(model, layout, q, k, torch.cat([vv, va], dim=1),
                            batch.look if last else None)
        looked = mass if last else looked
        out_vlm, out_act = out[:, :vlm_x.shape[1]], out[:, vlm_x.shape[1]:]
        vlm_x = vlm_x + vlm_layer.self_attn.o_proj(out_vlm.flatten(-2))
        act_x = act_x + expert_layer.self_attn.o_proj(out_act.flatten(-2)) * gate_attn
        h_vlm, _ = vlm_layer.post_attention_layernorm(vlm_x)
        vlm_x = vlm_x + vlm_layer.mlp(h_vlm)
        h_act, gate_mlp = expert_layer.post_attention_layernorm(act_x, cond)
        act_x = act_x + expert_layer.mlp(h_act) * gate_mlp
    logits = model.language_model.logits(vlm_x[:, layout.n_prefix:])
    velocity = model.action_velocity(act_x, cond)
    if batch.look is not None:
        return logits, velocity, looked.view(b, layout.n_text)
    return logits, velocity


def losses(model: Pi05Model, batch: TrainingBatch, generator: torch.Generator = None
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(next-token loss over the answers, flow-matching loss over the actions, look loss):
    noise at a random time t, x_t = t * noise + (1 - t) * actions, target velocity
    noise - actions; the look loss is -log of the attention share on batch.look's tokens
    where it names any (0 without)."""
    actions = batch.actions.to(model.dtype)
    noise = torch.randn(actions.shape, generator=generator, dtype=actions.dtype)
    t = torch.rand(actions.shape[0], generator=generator).to(actions.dtype) * 0.999 + 0.001
    x_t = t[:, None, None] * noise + (1 - t[:, None, None]) * actions
    logits, velocity, *looked = forward(model, batch, x_t, t)
    # the token at position i is predicted from position i - 1
    predicted = logits[:, :-1].flatten(0, 1)
    targets = batch.text[:, 1:].flatten()
    learned = batch.answer[:, 1:].flatten()
    text_loss = F.cross_entropy(predicted[learned].float(), targets[learned])
    action_loss = F.mse_loss(velocity.float(), (noise - actions).float())
    look_loss = torch.zeros(())
    if looked and batch.look.any():
        taught = batch.look.any(-1) & batch.text_valid
        look_loss = -(looked[0][taught] + 1e-6).log().mean()
    return text_loss, action_loss, look_loss
