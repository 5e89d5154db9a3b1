"""Builds the model the nodes and tools run — a checkpoint (checkpoint.py) or a preset with
seeded weights — with its tokenizer and normalization, on the requested device and dtype."""

from dataclasses import dataclass, field
from typing import Optional

import torch

from oxygen_ros.model import checkpoint as checkpoints
from oxygen_ros.model import normalization as norms
from oxygen_ros.model.config import preset as preset_config
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.tokenizer import ByteTokenizer, PaliGemmaTokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass
class LoadedModel:
    model: Pi05Model
    tokenizer: object
    description: str
    normalization: norms.Normalization = field(default_factory=norms.Normalization)


def load_model(preset: str = "small", checkpoint: str = "", tokenizer: str = "",
               device: str = "cpu", dtype: str = "float32", seed: int = 0,
               prefix_attention: Optional[str] = None, asset_id: str = "") -> LoadedModel:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    if checkpoint:
        model, info = checkpoints.load(checkpoint, device, DTYPES[dtype], prefix_attention)
        text = PaliGemmaTokenizer(tokenizer)
        if text.vocab_size > model.config.vocab_size:
            raise ValueError(f"tokenizer {tokenizer} has {text.vocab_size} pieces, more than the "
                             f"model's {model.config.vocab_size} embeddings")
        directory = info.path.parent
        norm = (norms.load_lerobot(directory) if info.format == "lerobot"
                else norms.load_openpi(directory, asset_id))
        return LoadedModel(model, text, f"{info.format} checkpoint {directory} "
                           f"({info.num_parameters / 1e6:.1f} M parameters, {dtype} on {device}; "
                           f"normalization: {norm.source})", norm)
    config = preset_config(preset)
    if prefix_attention:
        config = config.with_(prefix_attention=prefix_attention)
    model = Pi05Model(config, seed=seed).to(device, DTYPES[dtype]).eval()
    params = sum(p.numel() for p in model.parameters())
    return LoadedModel(model, ByteTokenizer(),
                       f"preset {preset} ({params / 1e6:.1f} M parameters, seed {seed}, "
                       f"{dtype} on {device})")
