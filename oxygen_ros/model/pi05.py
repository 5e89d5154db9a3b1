"""π0.5 as a mixture of transformers over the unified paged KV cache.

Prefix tokens (camera images, prompt) run through the VLM's Gemma weights; action tokens
through the action expert's. In every layer both attend jointly: the prefix sees only
itself (bidirectionally, or with causal prompt tokens in the OxyGen variant), actions see
the prefix and each other. Prefix K/V live in the page pool and are computed once; each
flow-matching step runs only the expert over the H action tokens, reading the prefix's
pages and writing its own K/V to the action tier. Language decoding extends a prefix's
page table with new tokens through the VLM weights.

The operations the engine calls (the prefill ones from PrefillPasses, prefill.py):
    prefill(prefix, cache)            -> PageTable (None if the pool is short)
    prefill_many(prefixes, cache)     -> [PageTable] (one batched pass; None if short)
    extend(table, tokens, cache)      -> logits of the last token
    decode(tables, tokens, cache)     -> logits [B, vocab] (one token per sequence)
    denoise(tables, x_t, t, cache)    -> velocity [B, H, action_dim] (writes no pages)
    sample_actions(tables, noise, cache) -> actions [B, H, action_dim]
Callers reserve() room in the tables before extend/decode; prefill reserves its own.
"""

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from oxygen_ros.cache.attention import decode_attention, suffix_attention
from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.cache.page_table import PageTable
from oxygen_ros.cache.dense_suffix import DenseSuffix
from oxygen_ros.cache.paged_attention import paged_attention
from oxygen_ros.model.compiled_pass import CompiledPass
from oxygen_ros.model.config import ModelConfig
from oxygen_ros.model.gemma import Gemma, rope, rope_tables
from oxygen_ros.model.prefill import PrefillPasses, padded_tokens
from oxygen_ros.model.prefix import Prefix
from oxygen_ros.model.siglip import SiglipVisionModel

Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
# Float32 in every dtype, as openpi and lerobot both run π0.5 in bfloat16: the heads outside
# the VLM-with-expert, which their cast to bfloat16 never reaches (and so the flow-matching
# Euler state the heads read and feed), and the Gemma norms that cast keeps (with the
# expert's adaRMS modulation).
FLOAT32_HEADS = ("action_in_proj", "action_out_proj", "time_mlp_in", "time_mlp_out")
FLOAT32_NORMS = ("input_layernorm", "post_attention_layernorm", "language_model.norm",
                 "expert.norm")


class Pi05Model(PrefillPasses, nn.Module):
    def __init__(self, config: ModelConfig, seed: int = 0, dtype: torch.dtype = torch.float32):
        """dtype: the parameters are made and drawn in it (the full-size model in bfloat16
        never exists in float32; the draws differ from float32 ones rounded), all but the
        FLOAT32_HEADS and FLOAT32_NORMS, which are then kept in float32."""
        super().__init__()
        self.config = config
        expert_width = config.expert.width
        default_dtype = torch.get_default_dtype()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            torch.set_default_dtype(dtype)
            try:
                self.vision = SiglipVisionModel(config.vision)
                self.projector = nn.Linear(config.vision.width, config.vlm.width)
                self.language_model = Gemma(config.vlm, config.norm_eps,
                                            vocab_size=config.vocab_size)
                self.expert = Gemma(config.expert, config.norm_eps, cond_dim=expert_width)
                self.action_in_proj = nn.Linear(config.action_dim, expert_width)
                self.action_out_proj = nn.Linear(expert_width, config.action_dim)
                self.time_mlp_in = nn.Linear(expert_width, expert_width)
                self.time_mlp_out = nn.Linear(expert_width, expert_width)
                self._init_weights()
            finally:
                torch.set_default_dtype(default_dtype)
        self.keep_float32_parts()
        self.scale = config.vlm.head_dim ** -0.5
        # Part of every prefix-index key: cached K/V are only valid for these weights.
        self.weights_version = f"random-init-seed-{seed}"
        self.compiled_passes: dict[str, CompiledPass] = {}     # compile_passes()
        self.counters = {"prefix_tokens_computed": 0, "prefix_tokens_reused": 0}
        self.graphs = None     # model/cuda_graphs.CudaGraphs once enabled (CUDA only)

    def keep_float32_parts(self) -> None:
        """Put the FLOAT32_HEADS and FLOAT32_NORMS back in float32 (after a cast)."""
        for name, module in self.named_modules():
            if name in FLOAT32_HEADS or name.endswith(FLOAT32_NORMS):
                module.float()

    def _init_weights(self) -> None:
        """Random weights that behave like a model: with tied embeddings and default init a
        random Gemma repeats its input token forever. Sharp attention (large q/k weights)
        and a zero-mean output gain make greedy text depend on the context, so decoding
        tests can tell sequences apart; the adaRMS modulation is small but non-zero."""
        nn.init.normal_(self.language_model.embed_tokens.weight, std=0.02)
        nn.init.normal_(self.language_model.norm.weight, mean=-1.0, std=1.0)
        for layer in self.language_model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                nn.init.normal_(proj.weight, std=4.0 / proj.in_features ** 0.5)
        for name, param in self.expert.named_parameters():
            if ".dense." in name or name.startswith("norm.dense"):
                nn.init.normal_(param, std=0.02)

    def compile_blocks(self) -> None:
        """torch.compile the MLP blocks (most of the FLOPs); attention stays as it is."""
        stacks = (self.language_model.layers, self.expert.layers, self.vision.encoder.layers)
        for layers in stacks:
            for layer in layers:
                layer.mlp.forward = torch.compile(layer.mlp.forward, dynamic=True)

    def compile_passes(self) -> None:
        """torch.compile (inductor) the passes every frame runs: the vision tower, the
        prefill of new observations (one or a batch), the denoising step and the decode
        step, each into one graph (attention reads whole page tables, so no length leaves
        the graph), the weights frozen into it and its matmuls autotuned (inductor's AMX
        micro-kernels or oneDNN on a CPU). Inference only: the parameters stop requiring
        gradients. The first call of each new shape (a batch of one, then of several)
        compiles (tens of seconds) until settle_compiled(); partially cached prefixes and
        prompts stay eager."""
        self.requires_grad_(False)
        for name in ("embed_images", "_dense_prefill", "velocity", "decode_step"):
            self.compiled_passes[name] = CompiledPass(getattr(self, name))
            setattr(self, name, self.compiled_passes[name])

    def settle_compiled(self) -> None:
        """From now on a call of a compiled pass with shapes no graph covers runs eager
        (counted in eager_calls) instead of compiling."""
        for compiled in self.compiled_passes.values():
            compiled.settled = True

    @property
    def eager_calls(self) -> int:
        """Calls of compiled passes that ran eager after settle_compiled()."""
        return sum(compiled.eager_calls for compiled in self.compiled_passes.values())

    @property
    def dtype(self) -> torch.dtype:
        """The compute dtype (norms, heads and the vision path may be kept in float32)."""
        return self.language_model.embed_tokens.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.projector.weight.device

    # -- embeddings ---------------------------------------------------------------------
    def embed_images(self, images: torch.Tensor) -> torch.Tensor:
        """[cameras, 3, S, S] -> [cameras * patches, vlm width] (no sqrt(width) scaling)."""
        features = self.vision(images.to(self.device))
        projected = self.projector(features.to(self.projector.weight.dtype))
        return projected.flatten(0, 1).to(self.dtype)

    def embed_prefix(self, prefix: Prefix, start: int = 0) -> torch.Tensor:
        """Embeddings of prefix tokens [start:], running the vision tower only if needed."""
        parts = []
        if start < prefix.num_image_tokens:
            parts.append(self.embed_images(prefix.images)[start:])
        first_prompt = max(0, start - prefix.num_image_tokens)
        parts.append(self.language_model.embed(prefix.tokens[first_prompt:].to(self.device)))
        return torch.cat(parts)

    def time_condition(self, t: torch.Tensor) -> torch.Tensor:
        """Flow-matching time [B] -> adaRMS condition [B, expert width]."""
        width = self.config.expert.width
        fraction = torch.linspace(0.0, 1.0, width // 2, device=self.device, dtype=torch.float64)
        period = self.config.time_min_period * (
            self.config.time_max_period / self.config.time_min_period) ** fraction
        angle = t.to(self.device, torch.float64)[:, None] / period[None, :] * (2 * math.pi)
        emb = torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)
        emb = emb.to(self.time_mlp_in.weight.dtype)
        return F.silu(self.time_mlp_out(F.silu(self.time_mlp_in(emb))))

    def embed_actions(self, x_t: torch.Tensor) -> torch.Tensor:
        """Noisy actions [B, H, action_dim] -> the expert's input tokens."""
        head = self.action_in_proj
        return head(x_t.to(self.device, head.weight.dtype)).to(self.dtype)

    def action_velocity(self, hidden: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """The expert's last hidden states -> velocity [B, H, action_dim] in float32."""
        normed, _ = self.expert.norm(hidden, cond)
        return self.action_out_proj(normed.to(self.action_out_proj.weight.dtype))

    # -- the layer loops -----------------------------------------------------------------
    def _rope_tables(self, positions: torch.Tensor, dtype: torch.dtype):
        return rope_tables(positions, self.config.vlm.head_dim, self.config.rope_max_wavelength,
                           dtype)

    def _run_vlm(self, x: torch.Tensor, positions: torch.Tensor, attend: Attend) -> torch.Tensor:
        tables = self._rope_tables(positions, x.dtype)
        for i, layer in enumerate(self.language_model.layers):
            h, _ = layer.input_layernorm(x)
            q, k, v = layer.self_attn.qkv(h)
            out = attend(i, rope(q, tables), rope(k, tables), v)
            x = x + layer.self_attn.o_proj(out.flatten(-2))
            h, _ = layer.post_attention_layernorm(x)
            x = x + layer.mlp(h)
        return x

    def _run_expert(self, x: torch.Tensor, cond: torch.Tensor, positions: torch.Tensor,
                    attend: Attend) -> torch.Tensor:
        tables = self._rope_tables(positions, x.dtype)
        for i, layer in enumerate(self.expert.layers):
            h, gate = layer.input_layernorm(x, cond)
            q, k, v = layer.self_attn.qkv(h)
            out = attend(i, rope(q, tables), rope(k, tables), v)
            x = x + layer.self_attn.o_proj(out.flatten(-2)) * gate
            h, gate = layer.post_attention_layernorm(x, cond)
            x = x + layer.mlp(h) * gate
        return x

    # -- language -------------------------------------------------------------------------
    @torch.no_grad()
    def extend(self, table: PageTable, tokens: Sequence[int], cache: KVCache) -> torch.Tensor:
        """Append causal tokens (a request's prompt) to a table; logits of the last one [V].
        The pass runs padded_tokens(count) tokens; padding is neither seen nor stored."""
        start, count = table.length, len(tokens)
        self._check_room(cache, [table], count)
        padded = list(tokens) + [0] * (padded_tokens(count) - count)
        x = self.language_model.embed(torch.tensor(padded, device=self.device))[None]
        positions = torch.arange(start, start + len(padded), device=self.device)[None]
        keys = torch.arange(start + count, device=self.device)
        visible = keys[None, :] <= positions[0, :, None]                  # causal
        slots = cache.slots([table], [start], count)
        block_tables = cache.block_tables([table])
        lens = torch.tensor([start + count], device=self.device)

        def attend(layer, q, k, v):
            cache.write(layer, slots, k[:, :count], v[:, :count])
            return paged_attention(q, cache.pool.k[layer], cache.pool.v[layer], block_tables,
                                   lens, self.scale, visible=visible[None])

        hidden = self._run_vlm(x, positions, attend)
        table.length += count
        return self.language_model.logits(hidden[0, count - 1])

    def decode_inputs(self, tables: Sequence[PageTable], tokens: Sequence[int],
                      cache: KVCache) -> "DecodeInputs":
        """The tensors one decode step reads: everything a replayed CUDA graph needs."""
        self._check_room(cache, tables, 1)
        lengths = [t.length for t in tables]
        return DecodeInputs(
            tokens=torch.tensor(list(tokens), device=self.device),
            positions=torch.tensor(lengths, device=self.device),
            slots=cache.slots(tables, lengths, 1)[:, 0],
            block_tables=cache.block_tables(tables))

    @torch.no_grad()
    def decode_step(self, inputs: "DecodeInputs", cache: KVCache) -> torch.Tensor:
        """One token per row of `inputs` (no Python-side data: capturable as a CUDA graph)."""
        x = self.language_model.embed(inputs.tokens)[:, None]
        positions = inputs.positions[:, None]
        slots = inputs.slots[:, None]
        lens = inputs.positions + 1

        def attend(layer, q, k, v):
            cache.write(layer, slots, k, v)
            return decode_attention(q[:, 0], cache.pool.k[layer], cache.pool.v[layer],
                                    inputs.block_tables, lens, self.scale)[:, None]

        hidden = self._run_vlm(x, positions, attend)
        return self.language_model.logits(hidden[:, 0])

    @torch.no_grad()
    def decode(self, tables: Sequence[PageTable], tokens: Sequence[int],
               cache: KVCache) -> torch.Tensor:
        """One token per sequence (tables may belong to prefixes of different frames)."""
        inputs = self.decode_inputs(tables, tokens, cache)
        runner = self.graphs.decode_runner(cache, inputs) if self.graphs else None
        logits = runner.run(inputs) if runner else self.decode_step(inputs, cache)
        for table in tables:
            table.length += 1
        return logits

    def _check_room(self, cache: KVCache, tables: Sequence[PageTable], count: int) -> None:
        for table in tables:
            if cache.pages_for(table.length + count) > len(table.pages):
                raise RuntimeError("reserve() room in the page table before writing tokens")

    # -- actions --------------------------------------------------------------------------
    def action_inputs(self, tables: Sequence[PageTable], cache: KVCache) -> "ActionInputs":
        """The tensors the denoising loop reads for these prefixes."""
        return ActionInputs(
            prefix_lens=torch.tensor([table.length for table in tables], device=self.device),
            block_tables=cache.block_tables(tables))

    @torch.no_grad()
    def denoise(self, tables: Sequence[PageTable], x_t: torch.Tensor, t: torch.Tensor,
                cache: KVCache) -> torch.Tensor:
        """Flow-matching velocity of noisy actions x_t [B, H, action_dim] at times t [B]."""
        return self.velocity(self.action_inputs(tables, cache), x_t, t, cache)

    def velocity(self, inputs: "ActionInputs", x_t: torch.Tensor, t: torch.Tensor,
                 cache: KVCache) -> torch.Tensor:
        batch, horizon, _ = x_t.shape
        if batch > cache.actions.max_batch:
            raise ValueError(f"{batch} action chunks exceed the action tier's "
                             f"{cache.actions.max_batch}")
        prefix_lens = inputs.prefix_lens
        positions = prefix_lens[:, None] + torch.arange(horizon, device=self.device)[None]
        scratch = cache.actions
        if (self.device.type == "cpu" and inputs.dense is None
                and not torch.compiler.is_compiling() and not torch.is_grad_enabled()):
            inputs.dense = DenseSuffix(cache.pool.k, cache.pool.v, inputs.block_tables,
                                       prefix_lens, horizon, self.scale)

        def attend(layer, q, k, v):
            if torch.is_grad_enabled():   # Real-Time Chunking's vector-Jacobian product
                return paged_attention(q, cache.pool.k[layer], cache.pool.v[layer],
                                       inputs.block_tables, prefix_lens, self.scale,
                                       extra_k=k, extra_v=v)
            if inputs.dense is not None and not torch.compiler.is_compiling():
                return inputs.dense.attend(layer, q, k, v)
            scratch.k[layer, :batch] = k
            scratch.v[layer, :batch] = v
            return suffix_attention(q, cache.pool.k[layer], cache.pool.v[layer],
                                    inputs.block_tables, prefix_lens, scratch.k[layer, :batch],
                                    scratch.v[layer, :batch], self.scale)

        cond = self.time_condition(t)
        x = self._run_expert(self.embed_actions(x_t), cond, positions, attend)
        return self.action_velocity(x, cond)

    @torch.no_grad()
    def integrate(self, inputs: "ActionInputs", noise: torch.Tensor, cache: KVCache,
                  num_steps: Optional[int] = None) -> torch.Tensor:
        """Euler integration of the flow from noise at t = 1 to actions at t = 0, in float32
        (no Python-side data: capturable as a CUDA graph)."""
        steps = num_steps or self.config.num_denoise_steps
        dt = -1.0 / steps
        x = noise.to(self.device, torch.float32)
        for step in range(steps):
            t = torch.full((x.shape[0],), 1.0 + step * dt, device=self.device)
            x = x + dt * self.velocity(inputs, x, t, cache)
        return x

    @torch.no_grad()
    def sample_actions(self, tables: Sequence[PageTable], noise: torch.Tensor, cache: KVCache,
                       num_steps: Optional[int] = None) -> torch.Tensor:
        """Actions [B, H, action_dim] (float32) for these prefixes from `noise`."""
        inputs = self.action_inputs(tables, cache)
        runner = self.graphs.action_runner(cache, inputs) \
            if self.graphs and num_steps is None else None
        if runner is not None:
            return runner.run(inputs, noise)
        return self.integrate(inputs, noise, cache, num_steps)


@dataclass
class DecodeInputs:
    tokens: torch.Tensor          # [B] the token each sequence feeds
    positions: torch.Tensor       # [B] its position (= tokens already in the table)
    slots: torch.Tensor           # [B] flat pool slot its K/V go to
    block_tables: torch.Tensor    # [B, pages] int32


@dataclass
class ActionInputs:
    prefix_lens: torch.Tensor     # [B]
    block_tables: torch.Tensor    # [B, pages] int32
    dense: Optional[DenseSuffix] = None   # CPU, eager: the prefixes gathered once a chunk
