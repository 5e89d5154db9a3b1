"""The loader on a checkpoint with lerobot pi05's real key layout and real widths (2 layers,
a 1024-token vocabulary): every key maps, bf16 tensors stay views of the file."""

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model.checkpoint import KEEP_FLOAT32, checkpoint_key, load
from oxygen_ros.model.config import preset
from oxygen_ros.model.prefix import build_prefix

TOOL = Path(__file__).resolve().parents[2] / "tools" / "write_random_checkpoint.py"


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    out = tmp_path_factory.mktemp("pi05_2_layers")
    subprocess.run([sys.executable, str(TOOL), str(out), "--layers", "2", "--vocab", "1024"],
                   check=True, capture_output=True)
    return out


def test_real_widths_and_layout_load_in_bfloat16(directory):
    model, info = load(directory, dtype=torch.bfloat16)
    real = preset("pi05")
    assert info.format == "lerobot"
    assert model.config.vision == replace(real.vision, depth=2)
    for ours, theirs in ((model.config.vlm, real.vlm), (model.config.expert, real.expert)):
        assert (ours.width, ours.mlp_dim, ours.num_heads, ours.num_kv_heads, ours.head_dim) == (
            theirs.width, theirs.mlp_dim, theirs.num_heads, theirs.num_kv_heads, theirs.head_dim)
    kept = {n for n, p in model.named_parameters() if p.dtype == torch.float32}
    assert kept == {n for n, _ in model.named_parameters()
                    if any(s in checkpoint_key(n) for s in KEEP_FLOAT32["lerobot"])}


def test_bfloat16_tensors_are_views_of_one_file_mapping(directory):
    model, _ = load(directory, dtype=torch.bfloat16)
    layer = model.language_model.layers[0]
    q, k = layer.self_attn.q_proj.weight, layer.self_attn.k_proj.weight
    # stored one after the other (the header's order): the distance in memory is q's size
    names = [n for n, _ in model.named_parameters()]
    assert names.index("language_model.layers.0.self_attn.k_proj.weight") == \
        names.index("language_model.layers.0.self_attn.q_proj.weight") + 1
    assert k.data_ptr() - q.data_ptr() == q.numel() * q.element_size()


def test_the_loaded_model_prefills_and_samples(directory):
    model, _ = load(directory, dtype=torch.bfloat16)
    config = model.config
    cameras = ["base", "left_wrist", "right_wrist"]
    size = config.vision.image_size
    images = {c: np.full((size, size, 3), 100, dtype=np.uint8) for c in cameras}
    prefix = build_prefix(config, cameras, images, list(range(2, 40)))
    cache = KVCache.for_model(config, num_pages=64, dtype=torch.bfloat16)
    table = model.prefill(prefix, cache)
    actions = model.sample_actions([table], torch.randn(1, 50, 32), cache, num_steps=2)
    assert actions.shape == (1, 50, 32) and bool(torch.isfinite(actions.float()).all())
