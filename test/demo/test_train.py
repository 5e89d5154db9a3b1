"""train-demo on a tiny budget: it runs, lowers both losses, is deterministic from its seed
and writes a lerobot pi05 checkpoint that the product's own loader runs."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from oxygen_ros.demo.observe import world_observation
from oxygen_ros.demo.questions import PLACES, place
from oxygen_ros.demo.sampling import Sampler, patch_targets
from oxygen_ros.demo.train import TrainConfig, statistics, train
from oxygen_ros.demo.world import COLORS, SHAPES, TabletopWorld
from oxygen_ros.model.config import preset
from oxygen_ros.model.loading import load_model
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.tokenizer import ByteTokenizer


def test_a_short_training_lowers_the_losses_and_saves_a_loadable_checkpoint(tmp_path):
    # the default time budget (30 min): a budget stop on a loaded machine would end the
    # two runs at different steps; float32: bf16 autocast is ~100x slower on a CPU
    # without bf16 matrix units (AVX512-BF16, AMX)
    config = TrainConfig(steps=16, batch=4, lr=2e-3, eval_worlds=1, vision_steps=10,
                         seeing_batch=4, precision="fp32")
    manifest = train(tmp_path / "a", config, show_progress=False)
    loss = manifest["loss"]
    assert loss["text"]["last"] < loss["text"]["first"]
    assert loss["action"]["last"] < loss["action"]["first"]
    files = {p.name for p in (tmp_path / "a").iterdir()}
    assert {"model.safetensors", "config.json", "manifest.json", "loss.png",
            "policy_preprocessor_step_0_normalizer_processor.safetensors"} <= files
    digest = hashlib.sha256((tmp_path / "a" / "model.safetensors").read_bytes()).hexdigest()
    assert manifest["model_safetensors_sha256"] == digest
    # readable as every other file there (safetensors alone would write 0600)
    assert len({p.stat().st_mode & 0o777 for p in (tmp_path / "a").iterdir()}) == 1
    assert "--eval-worlds 1 " in manifest["command"]        # the command reruns this run
    loaded = load_model(checkpoint=str(tmp_path / "a"))
    assert isinstance(loaded.tokenizer, ByteTokenizer)
    assert loaded.model.config.action_dim == 14 and loaded.normalization.actions is not None
    assert set(manifest["metrics"]) >= {"answer_accuracy", "memory_accuracy", "action_error"}
    again = train(tmp_path / "b", TrainConfig(steps=16, batch=4, lr=2e-3, eval_worlds=1,
                                              vision_steps=10, seeing_batch=4,
                                              precision="fp32"), show_progress=False)
    assert manifest["steps"] == again["steps"] == 16
    assert again["model_safetensors_sha256"] == digest                 # same seed, same model
    assert np.isclose(again["loss"]["text"]["last"], loss["text"]["last"])
    # evaluate-demo judges the saved checkpoint as the training judged the model it saved
    result = subprocess.run([sys.executable, "-m", "oxygen_ros.cli", "evaluate-demo",
                             "--checkpoint", str(tmp_path / "a"), "--worlds", "1"],
                            capture_output=True, text=True, timeout=300,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr
    judged = json.loads(result.stdout)
    assert judged["manifest_metrics_match"] is True, (judged, manifest["metrics"])
    assert judged["unseen_worlds"]["questions"] == manifest["metrics"]["questions"]
    # the demo's six questions, on each camera frame (15 Hz) from the moment to 0.14 s later
    moments = judged["demo_moments"]
    assert moments["questions"] == 2 + 2 + 3 + 2 + 3 + 2
    assert len(moments["answer_accuracy_by_moment"]) == 6
    assert len(moments["misses"]) == round((1 - moments["answer_accuracy"]) * 14)


def test_patch_targets_name_what_the_base_camera_shows_there():
    """The auxiliary targets must agree with the pixels the model sees: the patch holding
    a thing's centre is labelled with its colour and shape, and shows that colour."""
    config = preset("demo")
    size, patch = config.vision.image_size, config.vision.patch_size
    n = size // patch
    # (0, 5.07): the carried cup over the red ball, which shows around it
    for seed, t in ((0, 1.0), (0, 5.07), (1, 5.0), (7, 9.0), (12, 0.0)):
        world = TabletopWorld(seed)
        targets = patch_targets(world, t, config.vision).reshape(n, n, 3)
        image = world_observation(world, t, size).images["base"]
        for index, thing in enumerate(world.things):
            x, y, z, where = world.where(index, t)
            # the thing's colour, as drawn (darker in the bin), is in the image
            color = np.array(COLORS[thing.color]) * (0.6 if where == "bin" else 1.0)
            near = np.abs(image.astype(float) - color).sum(-1) < 40
            rows, cols = np.nonzero(near)
            assert len(rows), (seed, thing)
            row, col = int(np.median(rows)) // patch, int(np.median(cols)) // patch
            assert tuple(targets[row, col]) == (1 + list(COLORS).index(thing.color),
                                                1 + SHAPES.index(thing.shape),
                                                1 + PLACES.index(place(world, index, t))
                                                ), (seed, thing)
        assert (targets[..., 0] == 0).sum() > n * n // 3        # most of the table is empty
    # the carried thing owns every patch it touches, though another's centre is nearer:
    # at (0, 5.07) the patch below the cup's centre shows 16 pixels of its ring over the
    # red ball's edge (2 red)
    world = TabletopWorld(0)
    targets = patch_targets(world, 5.07, config.vision).reshape(n, n, 3)
    assert [tuple(targets[row, 2]) for row in (4, 5)] == [(4, 1, 5), (4, 1, 5)]
    assert tuple(targets[4, 3]) == (1, 3, 3)          # the red ball, at the front


def test_seeing_frames_are_the_base_camera_the_model_receives():
    """The auxiliary loss's extra frames are rendered and letterboxed exactly as the
    base camera of a training prefix (and of the running system)."""
    config = preset("demo")
    model = Pi05Model(config, seed=0)
    images, patches = Sampler(model, statistics(worlds=4), seed=3).seeing(2)
    again = Sampler(model, statistics(worlds=4), seed=3)
    for image, targets in zip(images, patches):
        world = TabletopWorld(again.first_world + int(again.rng.integers(1_000_000)))
        t = again.rng.uniform(0, 12.0)
        assert torch.equal(image, again.observation(world, t).images[0])
        assert np.array_equal(targets.numpy(), patch_targets(world, t, config.vision))


def test_lookups_are_taught_to_look_at_the_things_patches():
    """The look mask is set exactly on the positions that predict a byte of "where is
    the <thing>?"'s or "what colour is the <shape>?"'s reply (and its end), or of a
    shape that "what do you see?" names, and names the base-camera patches of that
    thing (by its colour, unique in a world)."""
    config = preset("demo")
    sampler = Sampler(Pi05Model(config, seed=0), statistics(worlds=4), seed=7)
    batch, patches = sampler.batch(3, memory_share=0.5)
    tokenizer = ByteTokenizer()
    n = patches.shape[1]
    taught = {"where": 0, "colour": 0, "see": 0}
    for row in range(3):
        for i in range(batch.text.shape[1] - 1):
            told = batch.look[row, i]
            assert not told[n:].any()                      # the base camera's tokens only
            predicts = (batch.text_valid[row, i + 1] and batch.answer[row, i + 1]
                        and batch.segment[row, i + 1] == batch.segment[row, i])
            start = int((batch.segment[row, :i + 1] != batch.segment[row, i]).sum())
            request = tokenizer.decode(batch.text[row, start:i + 2].tolist())
            question, _, reply = request.partition("\nRobot: ")
            colour = None
            if predicts and question.startswith("\nUser: where is the "):
                colour, kind = question.split("where is the ")[1].split()[0], "where"
            elif predicts and question.startswith("\nUser: what colour is the "):
                end = batch.text[row, start:].tolist().index(tokenizer.eos_id)
                colour = tokenizer.decode(batch.text[row, start:start + end].tolist()
                                          ).split("\nRobot: ")[1]
                kind = "colour"
            elif predicts and question == "\nUser: what do you see?" and reply:
                item = reply.split(", ")[-1].split(" and ")[-1].split()   # "a", colour, ..
                if (len(item) == 3 and reply[-1].isalpha()
                        and int(batch.text[row, i + 1]) != tokenizer.eos_id):
                    colour, kind = item[1], "see"                # a byte of the shape
            assert bool(told.any()) == (colour is not None), (row, request)
            if colour is not None:
                shows = patches[row, :, 0] == 1 + list(COLORS).index(colour)
                assert torch.equal(told[:n], shows) and shows.any(), (row, request)
                taught[kind] += 1
    assert min(taught.values()) > 5, taught
    # the release lasts 0.6 s of 12 (5 %), the grasp 1.3 s; training asks about each >= 9 %
    world = TabletopWorld(0)
    phases = [world.phase(sampler.moment()) for _ in range(4000)]
    for phase in ("grasping", "releasing"):
        assert phases.count(phase) / len(phases) > 0.09, phase


def test_memory_requests_number_frames_as_the_engine_does():
    """Window k's request names frames first..last as the engine counts them at some frame
    rate: first is where the window started, last the request's own frame."""
    model = Pi05Model(preset("demo"), seed=0)
    sampler = Sampler(model, statistics(worlds=4), seed=6)
    world = TabletopWorld(2)
    for t in (4.1, 8.2, 4.0, 8.45):
        for _ in range(20):
            prompt, truth = sampler.memory(world, t)
            first, last = map(int, prompt.rsplit("frames ", 1)[1].rstrip(": ").split("-"))
            rate = last / t
            assert 2.0 - 0.3 <= rate <= 10.0 + 0.3 and first < last
            assert abs(first - rate * (t - 4.0)) <= 3.5
            assert (prompt.split("Memory so far: ")[1].startswith("\n")) == (t < 6)
