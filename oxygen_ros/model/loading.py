"""Builds the model the nodes and tools run — a checkpoint (checkpoint.py) or a preset with
seeded weights — with its tokenizer and normalization, on the requested device and dtype."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import torch

from oxygen_ros.model import checkpoint as checkpoints
from oxygen_ros.model import normalization as norms
from oxygen_ros.model.config import preset as preset_config
from oxygen_ros.model.devices import device_problem
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.precision import resolve_dtype
from oxygen_ros.model.tokenizer import ByteTokenizer, PaliGemmaTokenizer
from oxygen_ros.resources import share_path

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass
class LoadedModel:
    model: Pi05Model
    tokenizer: object
    description: str
    normalization: norms.Normalization = field(default_factory=norms.Normalization)


PACKAGE_URL = "package://oxygen_ros/"


def resolve(checkpoint: str) -> Path:
    """A checkpoint path; package://oxygen_ros/<path> is <path> among the package's shared
    files (the checkout, or share/oxygen_ros of an install)."""
    if checkpoint.startswith("package://"):
        if not checkpoint.startswith(PACKAGE_URL):
            raise ValueError(f"{checkpoint}: only package://oxygen_ros/... is known")
        return share_path(*Path(checkpoint[len(PACKAGE_URL):]).parts)
    return Path(checkpoint)


def checkpoint_normalization(info: checkpoints.Checkpoint, asset_id: str = "",
                             normalization: str = "") -> norms.Normalization:
    """The statistics stored beside a checkpoint, as its layout keeps them (a ValueError
    names a file that is not readable, or statistics wider than the model), or none where
    `normalization` is "identity"."""
    if normalization == "identity":
        return norms.Normalization(source="identity (normalization: identity)")
    if info.format == "lerobot":
        if asset_id:
            raise ValueError(f"asset_id {asset_id!r} picks an openpi checkpoint's statistics; "
                             f"the lerobot checkpoint {info.path.parent} keeps one set: leave "
                             "asset_id empty")
        norm = norms.load_lerobot(info.path.parent, raw_config=info.raw_config)
    else:
        norm = norms.load_openpi(info.path.parent, asset_id)
    norms.check_widths(norm, info.config.state_dim, info.config.action_dim, str(info.path.parent))
    return norm


def checkpoint_tokenizer(config, tokenizer: str = ""):
    """The tokenizer a checkpoint's model runs with: its own bytes where it was trained on
    them (train-demo's) and none is given, else the PaliGemma SentencePiece model at
    `tokenizer`; ValueError where that is missing, unreadable or larger than the model's
    vocabulary."""
    if config.tokenizer == "bytes" and not tokenizer:
        return ByteTokenizer()
    text = PaliGemmaTokenizer(tokenizer)
    if text.vocab_size > config.vocab_size:
        raise ValueError(f"tokenizer {tokenizer} has {text.vocab_size} pieces, more than the "
                         f"model's {config.vocab_size} embeddings")
    return text


def load_model(preset: str = "small", checkpoint: str = "", tokenizer: str = "",
               device: str = "cpu", dtype: str = "float32", seed: int = 0,
               prefix_attention: Optional[str] = None, asset_id: str = "",
               normalization: str = "", heads: Optional[tuple] = None,
               vision_heads: int = 0, state_prompt: str = "", joints: int = 0) -> LoadedModel:
    """normalization: "" uses the checkpoint's statistics (an error if it should have them
    and does not), "identity" none. state_prompt: how the state enters the prompt
    (config.STATE_PROMPTS; "": as the checkpoint's layout was trained, padded for presets).
    joints: the robot's joint count, checked against the statistics before the weights are
    read (normalization.check_joints; 0: not checked). heads: (heads, kv heads, head_dim)
    for Gemma variants the loader does not know; vision_heads likewise for SigLIP. dtype
    auto: bfloat16 where the device has bf16 matrix units (model/precision.py); the
    description says why. A device this torch cannot run on is a ValueError saying why
    (model/devices.py)."""
    if problem := device_problem(device):
        raise ValueError(f"device {device}: {problem}")
    dtype, why = resolve_dtype(dtype, device)
    if normalization not in ("", "identity"):
        raise ValueError(f"normalization must be '' (the checkpoint's) or 'identity', not "
                         f"{normalization!r}")
    if checkpoint:
        checkpoint = str(resolve(checkpoint))
        # what the header and the small files say is checked before the weights are read
        info = checkpoints.inspect(checkpoint, heads, vision_heads)
        text = checkpoint_tokenizer(info.config, tokenizer)
        norm = checkpoint_normalization(info, asset_id, normalization)
        if joints:
            norms.check_joints(norm, joints,
                               state_read=(state_prompt or info.config.state_prompt) != "none")
        model, info = checkpoints.load(info, device, DTYPES[dtype], prefix_attention,
                                       state_prompt=state_prompt)
        directory = info.path.parent
        return LoadedModel(model, text, f"{info.format} checkpoint {directory} "
                           f"({info.num_parameters / 1e6:.1f} M parameters, {dtype} ({why}) "
                           f"on {device}; normalization: {norm.source}; state in the prompt: "
                           f"{model.config.state_prompt})", norm)
    config = preset_config(preset)
    if prefix_attention:
        config = config.with_(prefix_attention=prefix_attention)
    if state_prompt:
        config = config.with_(state_prompt=state_prompt)
    model = Pi05Model(config, seed=seed).to(device, DTYPES[dtype]).eval()
    params = sum(p.numel() for p in model.parameters())
    return LoadedModel(model, ByteTokenizer(),
                       f"preset {preset} ({params / 1e6:.1f} M parameters, seed {seed}, "
                       f"{dtype} ({why}) on {device})")
