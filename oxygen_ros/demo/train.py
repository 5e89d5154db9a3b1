"""train-demo: trains the `demo` preset on tabletop worlds — flow matching for the action
expert, next-token loss for answers and memory lines over the shared prefix — and saves
it in the lerobot pi05 layout (with normalization statistics and a manifest) so the
product's own loader runs it.

Samples are built exactly as the running system builds its inputs: frames rendered at
the demo bag's camera size and letterboxed like camera_ingest, the state normalized and
written into π0.5's prompt, questions in the dialogue template and memory requests in
the memory template the engine uses. Each frame carries every question about it (and,
at a memory window's end, the memory request) packed after its one prefix, as the engine
forks requests from one shared prefix: one image pass feeds ~9 replies. Training starts
from training.initialize's weights, and first teaches the vision tower alone what each
base-camera patch shows (`seeing`: colour, shape, place), so that text learns from image
tokens that already say what is where. Lookups are also taught where to look (the look
loss: from the reply to "where is the <thing>?" or "what colour is the <shape>?", and the
shapes "what do you see?" names, the last layer's first head attends to the thing's
patches): without it the text learns the target's gripper and bin from the state and
guesses the rest. Frames are drawn half uniformly over the episode, half by phase, so
the short release is asked about as often as the rest. Training worlds have
seeds from TRAIN_SEEDS up; evaluation (and the demo, world 0) use unseen ones."""

import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from oxygen_ros import progress
from oxygen_ros.demo.evaluate import evaluate
from oxygen_ros.demo.sampling import EPISODE_S, PATCH_CLASSES, TRAIN_SEEDS, Sampler
from oxygen_ros.demo.world import TabletopWorld
from oxygen_ros.model import training
from oxygen_ros.model.checkpoint import checkpoint_key
from oxygen_ros.model.config import preset
from oxygen_ros.model.normalization import Normalization, Stats
from oxygen_ros.model.pi05 import Pi05Model


@dataclass
class TrainConfig:
    steps: int = 2000
    batch: int = 8                 # frames per step; every question about each is packed
    lr: float = 1e-3
    seed: int = 0
    memory_share: float = 0.25     # of frames that also get a memory request
    time_budget_s: float = 1800.0  # stop early (and say so) when this is spent
    eval_worlds: int = 24
    precision: str = "bf16"        # of the training passes' matmuls (autocast; weights and
                                   # optimizer stay float32): 1.45x the steps of "fp32" on
                                   # a CPU with AVX512-BF16
    patch_weight: float = 0.5      # of the auxiliary loss on what the base camera's patches show
    look_weight: float = 0.2       # of the look loss: from "where is the <thing>?"'s reply
                                   # (and the shapes "what do you see?" names, and "what
                                   # colour is"'s reply) the last layer's first head is
                                   # taught to attend to the thing's base-camera patches
                                   # (without it the text learns the gripper and bin from
                                   # the state, and guesses the rest)
    seeing_batch: int = 16         # extra base-camera frames per step for that loss alone
    vision_steps: int = 1000       # steps of that loss alone (on 2 * seeing_batch frames)
                                   # before the joint training: text starts from image
                                   # tokens that already say what is where

    def __post_init__(self):
        if self.precision not in ("bf16", "fp32"):
            raise ValueError(f"precision must be bf16 or fp32, not {self.precision!r}")


def seeing(model: Pi05Model, head: torch.nn.Linear, base: torch.Tensor,
           patches: torch.Tensor) -> torch.Tensor:
    """Auxiliary loss: the colour (or nothing) of each base-camera patch, and the shape
    and place of the thing in each patch that shows one, read linearly off the image
    tokens the language model receives. Without it the image tokens stay nearly alike,
    text never learns to look at them and answers from the prompt alone. Shape and place
    are judged on the things' patches only: over every patch the empty table outweighs
    them and the tower learns colours but not shapes."""
    logits = head(model.embed_images(base).float())    # [B * patches, sum(PATCH_CLASSES)]
    targets = patches.reshape(-1, 3)
    on_thing = targets[:, 0] > 0
    loss = torch.zeros(())
    for column, logit in enumerate(logits.split(PATCH_CLASSES, dim=-1)):
        rows = on_thing if column else slice(None)
        if column and not on_thing.any():
            continue
        loss = loss + torch.nn.functional.cross_entropy(logit[rows], targets[rows, column])
    return loss


def see_first(model: Pi05Model, head: torch.nn.Linear, sampler: Sampler,
              config: TrainConfig, show_progress: bool) -> None:
    """The auxiliary loss alone for config.vision_steps steps (vision tower, projector
    and head: cheap, the language model is not run)."""
    parameters = [*model.vision.parameters(), *model.projector.parameters(),
                  *head.parameters()]
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, weight_decay=0.01)
    warmup = max(1, config.vision_steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: min(1, (k + 1) / warmup))
    steps = progress.bar(config.vision_steps, "seeing first", "step",
                         disable=not show_progress or not config.vision_steps)
    for step in range(config.vision_steps):
        with _autocast(config):
            loss = seeing(model, head, *sampler.seeing(2 * config.seeing_batch))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        steps.set_postfix_str(f"patch loss {loss.item():.3f}", refresh=False)
        steps.update()
    steps.close()


def _autocast(config: TrainConfig):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.precision == "bf16")


def statistics(worlds: int = 200, seed: int = 0) -> Normalization:
    """Quantile statistics of the expert's joint positions (state and actions alike)."""
    rng = np.random.default_rng(seed)
    values = np.stack([TabletopWorld(TRAIN_SEEDS + int(s)).joint_positions(t)
                       for s in rng.integers(1_000_000, size=worlds)
                       for t in np.linspace(0, EPISODE_S, 25)])
    low, high = np.quantile(values, 0.01, axis=0), np.quantile(values, 0.99, axis=0)
    stats = Stats(low, high, "quantile", "lerobot")
    return Normalization(stats, stats, "lerobot demo statistics (quantile)")


def train(out: Path, config: TrainConfig, show_progress: bool = True) -> dict:
    """Train, evaluate on unseen worlds, save; the manifest (also written beside). With
    torch's deterministic algorithms: without them two runs of the same seed and threads
    gave different weights on a 2-core AVX2 CPU (AMD EPYC; 1 thread was reproducible)."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        return _train(out, config, show_progress)
    finally:
        torch.use_deterministic_algorithms(before)


def _train(out: Path, config: TrainConfig, show_progress: bool) -> dict:
    torch.manual_seed(config.seed)
    model_config = preset("demo")
    model = Pi05Model(model_config, seed=config.seed)
    training.initialize(model, config.seed)
    normalization = statistics(seed=config.seed)
    sampler = Sampler(model, normalization, config.seed)
    head = torch.nn.Linear(model_config.vlm.width, sum(PATCH_CLASSES))   # not saved
    started = time.monotonic()
    see_first(model, head, sampler, config, show_progress)
    optimizer = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=config.lr,
                                  weight_decay=0.01)
    warmup = max(1, config.steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(
        (step + 1) / warmup, 0.5 * (1 + math.cos(math.pi * min(1.0, step / config.steps)))))
    generator = torch.Generator().manual_seed(config.seed)
    history, step = [], 0
    steps = progress.bar(config.steps, "training", "step", disable=not show_progress)
    for step in range(config.steps):
        batch, patches = sampler.batch(config.batch, config.memory_share)
        images, more = sampler.seeing(config.seeing_batch)
        with _autocast(config):
            text_loss, action_loss, look_loss = training.losses(model, batch, generator)
            seen = seeing(model, head, torch.cat([batch.images[:, 0], images]),
                          torch.cat([patches, more]))
        optimizer.zero_grad()
        (text_loss + action_loss + config.patch_weight * seen
         + config.look_weight * look_loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        text_value, action_value = text_loss.item(), action_loss.item()
        history.append((step, text_value, action_value))
        elapsed = time.monotonic() - started
        steps.set_postfix_str(f"text {text_value:.3f} action {action_value:.3f} patch "
                              f"{seen.item():.3f} look {look_loss.item():.2f}", refresh=False)
        steps.update()
        if elapsed > config.time_budget_s:
            steps.write(f"time budget of {config.time_budget_s:.0f} s spent at step {step + 1}",
                        file=sys.stderr)
            break
    steps.close()
    model.eval()
    metrics = evaluate(model, normalization, worlds=config.eval_worlds,
                       show_progress=show_progress)
    manifest = save(out, model, normalization, config, history, metrics,
                    time.monotonic() - started, step + 1)
    return manifest


def save(out: Path, model: Pi05Model, normalization: Normalization, config: TrainConfig,
         history, metrics: dict, seconds: float, steps: int) -> dict:
    """The lerobot pi05 layout: model.safetensors (keys under model.), config.json,
    the normalizer processor statistics; plus manifest.json and the loss plot."""
    out.mkdir(parents=True, exist_ok=True)
    mc = model.config
    tensors = {checkpoint_key(name, "model."): p.detach().contiguous()
               for name, p in model.named_parameters()}
    embedding = checkpoint_key("language_model.embed_tokens.weight", "model.")
    tensors["model.paligemma_with_expert.paligemma.lm_head.weight"] = tensors.pop(embedding)
    save_file(tensors, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps({
        "type": "pi05", "paligemma_variant": "demo", "action_expert_variant": "demo",
        "num_attention_heads": mc.vlm.num_heads, "num_key_value_heads": mc.vlm.num_kv_heads,
        "head_dim": mc.vlm.head_dim, "vision_num_attention_heads": mc.vision.num_heads,
        "chunk_size": mc.action_horizon, "n_action_steps": mc.action_horizon,
        "max_state_dim": mc.state_dim, "max_action_dim": mc.action_dim,
        "num_inference_steps": mc.num_denoise_steps,
        "tokenizer_max_length": mc.max_prompt_tokens, "tokenizer": "bytes",
        "normalization_mapping": {"VISUAL": "IDENTITY", "STATE": "QUANTILES",
                                  "ACTION": "QUANTILES"}}, indent=2))
    stats = {f"{key}.{name}": torch.tensor(getattr(s, attr), dtype=torch.float32)
             for key, s in (("observation.state", normalization.state),
                            ("action", normalization.actions))
             for name, attr in (("q01", "low"), ("q99", "high"))}
    normalizer = "policy_preprocessor_step_0_normalizer_processor.safetensors"
    save_file(stats, str(out / normalizer))
    mode = (out / "config.json").stat().st_mode & 0o777      # as the umask gives files
    for name in ("model.safetensors", normalizer):           # safetensors writes 0600
        (out / name).chmod(mode)
    digest = hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    manifest = {"command": f"oxygen-ros train-demo --out {out} --steps {config.steps} --batch "
                           f"{config.batch} --lr {config.lr:g} --seed {config.seed} "
                           f"--time-budget {config.time_budget_s:g} "
                           f"--vision-steps {config.vision_steps} "
                           f"--seeing-batch {config.seeing_batch} "
                           f"--precision {config.precision} "
                           f"--eval-worlds {config.eval_worlds} "
                           f"--threads {torch.get_num_threads()}",
                "seed": config.seed, "steps": steps, "batch": config.batch,
                "samples": steps * config.batch, "seconds": round(seconds),
                "torch_threads": torch.get_num_threads(), "metrics": metrics,
                "loss": {name: {"first": float(np.mean([h[column] for h in history[:5]])),
                                "last": float(np.mean([h[column] for h in history[-5:]]))}
                         for column, name in ((1, "text"), (2, "action"))},
                "model_safetensors_sha256": digest,
                "parameters": sum(p.numel() for p in model.parameters())}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    _plot(history, out / "loss.png")
    return manifest


def _plot(history, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [h[0] for h in history]
    fig, axis = plt.subplots(figsize=(7, 3.5))
    for column, label in ((1, "answers + memory (next token)"), (2, "actions (flow matching)")):
        values = np.array([h[column] for h in history])
        smooth = np.convolve(values, np.ones(20) / 20, mode="valid") if len(values) > 40 \
            else values
        axis.plot(steps[len(steps) - len(smooth):], smooth, label=label)
    axis.set_yscale("log")
    axis.set_xlabel("step")
    axis.set_ylabel("loss")
    axis.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

