"""train-demo on a tiny budget: it runs, lowers both losses, is deterministic from its seed
and writes a lerobot pi05 checkpoint that the product's own loader runs."""

import hashlib

import numpy as np

from oxygen_ros.demo.train import TrainConfig, train
from oxygen_ros.model.loading import load_model
from oxygen_ros.model.tokenizer import ByteTokenizer


def test_a_short_training_lowers_the_losses_and_saves_a_loadable_checkpoint(tmp_path):
    config = TrainConfig(steps=16, batch=4, lr=2e-3, eval_worlds=1, time_budget_s=300)
    manifest = train(tmp_path / "a", config, progress=lambda *_: None)
    loss = manifest["loss"]
    assert loss["text"]["last"] < loss["text"]["first"]
    assert loss["action"]["last"] < loss["action"]["first"]
    files = {p.name for p in (tmp_path / "a").iterdir()}
    assert {"model.safetensors", "config.json", "manifest.json", "loss.png",
            "policy_preprocessor_step_0_normalizer_processor.safetensors"} <= files
    digest = hashlib.sha256((tmp_path / "a" / "model.safetensors").read_bytes()).hexdigest()
    assert manifest["model_safetensors_sha256"] == digest
    loaded = load_model(checkpoint=str(tmp_path / "a"))
    assert isinstance(loaded.tokenizer, ByteTokenizer)
    assert loaded.model.config.action_dim == 14 and loaded.normalization.actions is not None
    assert set(manifest["metrics"]) >= {"answer_accuracy", "memory_accuracy", "action_error"}
    again = train(tmp_path / "b", TrainConfig(steps=16, batch=4, lr=2e-3, eval_worlds=1),
                  progress=lambda *_: None)
    assert again["model_safetensors_sha256"] == digest                 # same seed, same model
    assert np.isclose(again["loss"]["text"]["last"], loss["text"]["last"])
