"""Builds the model the nodes and tools run: a preset with seeded weights (checkpoints: see
checkpoint.py), with its tokenizer, on the requested device and dtype."""

from dataclasses import dataclass
from typing import Optional

import torch

from oxygen_ros.model.config import preset as preset_config
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.tokenizer import ByteTokenizer

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass
class LoadedModel:
    model: Pi05Model
    tokenizer: object
    description: str


def load_model(preset: str = "small", device: str = "cpu", dtype: str = "float32", seed: int = 0,
               prefix_attention: Optional[str] = None) -> LoadedModel:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    config = preset_config(preset)
    if prefix_attention:
        config = config.with_(prefix_attention=prefix_attention)
    model = Pi05Model(config, seed=seed).to(device, DTYPES[dtype]).eval()
    params = sum(p.numel() for p in model.parameters())
    return LoadedModel(model, ByteTokenizer(),
                       f"preset {preset} ({params / 1e6:.1f} M parameters, seed {seed}, "
                       f"{dtype} on {device})")
