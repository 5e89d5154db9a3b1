#!/usr/bin/env python3
"""Write a random π0.5 checkpoint in the lerobot pi05 layout (the real keys and widths;
--layers and --vocab shrink it), one tensor at a time, to a new temporary directory
unless given one. Tensors are stored as a bf16 run keeps them: bfloat16, with lerobot's
float32 selection (vision tower, projector, norms) in float32, so a bf16 load maps every
tensor without a copy. Never commit its output.

  .venv/bin/python tools/write_random_checkpoint.py                    # full size, ~7 GB
  .venv/bin/python tools/write_random_checkpoint.py DIR --layers 2 --vocab 1024
"""

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Optional

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the checkout's package
from oxygen_ros.model.checkpoint import (  # noqa: E402
    EMBEDDING, KEEP_FLOAT32, TIED_HEAD, expected_keys)
from oxygen_ros.model.config import preset  # noqa: E402
from oxygen_ros.model.pi05 import Pi05Model  # noqa: E402
from oxygen_ros.model.safetensors_file import write  # noqa: E402

PREFIX = "model."
EXPERT_HEAD = PREFIX + "paligemma_with_expert.gemma_expert.lm_head.weight"


def layout(layers: Optional[int], vocab: int) -> tuple[dict, dict]:
    """(key -> (shape, dtype), config.json) of the checkpoint; layers None: the real depths."""
    config = preset("pi05").with_(vocab_size=vocab)
    if layers:
        config = config.with_(vision=replace(config.vision, depth=layers),
                              vlm=replace(config.vlm, depth=layers),
                              expert=replace(config.expert, depth=layers))
    with torch.device("meta"):
        model = Pi05Model(config)
    shapes = expected_keys(model, PREFIX)
    # lerobot stores the tied output head instead of the embedding, and an unused expert head
    shapes[PREFIX + TIED_HEAD] = shapes.pop(PREFIX + EMBEDDING)
    shapes[EXPERT_HEAD] = (vocab, config.expert.width)
    keep = KEEP_FLOAT32["lerobot"]
    tensors = {key: (shape, torch.float32 if any(s in key[len(PREFIX):] for s in keep)
                     else torch.bfloat16) for key, shape in shapes.items()}
    raw = {"type": "pi05", "paligemma_variant": "gemma_2b", "action_expert_variant": "gemma_300m",
           "chunk_size": config.action_horizon, "n_action_steps": config.action_horizon,
           "max_state_dim": 32, "max_action_dim": config.action_dim,
           "num_inference_steps": config.num_denoise_steps,
           "tokenizer_max_length": config.max_prompt_tokens,
           "normalization_mapping": {"STATE": "IDENTITY", "ACTION": "IDENTITY"}}
    return tensors, raw


def write_checkpoint(directory: Path, layers: Optional[int] = None, vocab: int = 257_152,
                     seed: int = 0) -> Path:
    tensors, raw = layout(layers, vocab)
    generator = torch.Generator().manual_seed(seed)

    def make(key: str) -> torch.Tensor:
        shape, dtype = tensors[key]
        if key.endswith(".bias"):
            return torch.zeros(shape, dtype=dtype)
        if "layer_norm" in key or "post_layernorm" in key:     # SigLIP's LayerNorm gains
            return torch.ones(shape, dtype=dtype)
        if "norm" in key and "dense" not in key:              # Gemma's (1 + w) RMSNorm
            return torch.zeros(shape, dtype=dtype)
        return torch.randn(shape, generator=generator, dtype=dtype) * 0.02

    directory.mkdir(parents=True, exist_ok=True)
    write(directory / "model.safetensors", tensors, make)
    (directory / "config.json").write_text(json.dumps(raw, indent=2) + "\n")
    return directory


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", help="where (default: a new temporary directory)")
    parser.add_argument("--layers", type=int,
                        help="layers of every stack (default: the real 27 SigLIP, 18 Gemma)")
    parser.add_argument("--vocab", type=int, default=257_152, help="vocabulary (default 257152)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    directory = Path(args.directory or tempfile.mkdtemp(prefix="pi05_random_"))
    write_checkpoint(directory, args.layers, args.vocab, args.seed)
    print(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
