"""Checkpoints in the openpi PyTorch and lerobot pi05 layouts load into the same model.

The writers below spell the real key names out module by module (not through the
loader's own mapping), at small dimensions with the real shape conventions."""

import json
import pickle
import re

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.observation import Observation
from oxygen_ros.engine.oxygen import OxygenEngine
from oxygen_ros.model import checkpoint
from oxygen_ros.model.config import GemmaConfig, ModelConfig, VisionConfig, preset
from oxygen_ros.model.loading import load_model
from oxygen_ros.model.pi05 import FLOAT32_HEADS, Pi05Model
from oxygen_ros.model.prefix import build_prefix
from oxygen_ros.model.prompt import discretize_state
from oxygen_ros.model.tokenizer import ByteTokenizer

# the "dummy" Gemma variant of openpi (8 heads, 1 kv head, head_dim 16) for both experts;
# a SigLIP of 144 = 2 x 72 wide (So400m's head_dim)
CONFIG = ModelConfig(
    vision=VisionConfig(image_size=28, patch_size=14, width=144, depth=2, mlp_dim=64, num_heads=2),
    vlm=GemmaConfig(width=64, depth=2, mlp_dim=128, num_heads=8, num_kv_heads=1, head_dim=16),
    expert=GemmaConfig(width=48, depth=2, mlp_dim=96, num_heads=8, num_kv_heads=1, head_dim=16),
    vocab_size=512, num_cameras=3, action_horizon=5, action_dim=32, num_denoise_steps=10,
    max_prompt_tokens=200, tokenizer="paligemma")
VIT = "paligemma_with_expert.paligemma.model.vision_tower.vision_model."
LM = "paligemma_with_expert.paligemma.model.language_model."
EXPERT = "paligemma_with_expert.gemma_expert.model."


def real_keys(model: Pi05Model) -> dict[str, torch.Tensor]:
    """The openpi PyTorch state dict of `model`, key by key."""
    out = {}
    vit = model.vision
    out[VIT + "embeddings.patch_embedding.weight"] = vit.embeddings.patch_embedding.weight
    out[VIT + "embeddings.patch_embedding.bias"] = vit.embeddings.patch_embedding.bias
    out[VIT + "embeddings.position_embedding.weight"] = vit.embeddings.position_embedding.weight
    for i, layer in enumerate(vit.encoder.layers):
        stem = f"{VIT}encoder.layers.{i}."
        for norm in ("layer_norm1", "layer_norm2"):
            out[stem + f"{norm}.weight"] = getattr(layer, norm).weight
            out[stem + f"{norm}.bias"] = getattr(layer, norm).bias
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            out[stem + f"self_attn.{proj}.weight"] = getattr(layer.self_attn, proj).weight
            out[stem + f"self_attn.{proj}.bias"] = getattr(layer.self_attn, proj).bias
        for fc in ("fc1", "fc2"):
            out[stem + f"mlp.{fc}.weight"] = getattr(layer.mlp, fc).weight
            out[stem + f"mlp.{fc}.bias"] = getattr(layer.mlp, fc).bias
    out[VIT + "post_layernorm.weight"] = vit.post_layernorm.weight
    out[VIT + "post_layernorm.bias"] = vit.post_layernorm.bias
    out["paligemma_with_expert.paligemma.model.multi_modal_projector.linear.weight"] = model.projector.weight
    out["paligemma_with_expert.paligemma.model.multi_modal_projector.linear.bias"] = model.projector.bias
    out[LM + "embed_tokens.weight"] = model.language_model.embed_tokens.weight
    for stem, stack, adaptive in ((LM, model.language_model, False), (EXPERT, model.expert, True)):
        for i, layer in enumerate(stack.layers):
            prefix = f"{stem}layers.{i}."
            for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
                out[prefix + f"self_attn.{proj}.weight"] = getattr(layer.self_attn, proj).weight
            for proj in ("gate_proj", "up_proj", "down_proj"):
                out[prefix + f"mlp.{proj}.weight"] = getattr(layer.mlp, proj).weight
            for norm in ("input_layernorm", "post_attention_layernorm"):
                if adaptive:
                    out[prefix + f"{norm}.dense.weight"] = getattr(layer, norm).dense.weight
                    out[prefix + f"{norm}.dense.bias"] = getattr(layer, norm).dense.bias
                else:
                    out[prefix + f"{norm}.weight"] = getattr(layer, norm).weight
    out[LM + "norm.weight"] = model.language_model.norm.weight
    out[EXPERT + "norm.dense.weight"] = model.expert.norm.dense.weight
    out[EXPERT + "norm.dense.bias"] = model.expert.norm.dense.bias
    for name in ("action_in_proj", "action_out_proj", "time_mlp_in", "time_mlp_out"):
        out[f"{name}.weight"] = getattr(model, name).weight
        out[f"{name}.bias"] = getattr(model, name).bias
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


STATS = {"state": {"mean": [0.0] * 8, "std": [1.0] * 8, "q01": [-2.0] * 8, "q99": [2.0] * 8},
         "actions": {"mean": [0.0] * 32, "std": [1.0] * 32,
                     "q01": np.linspace(-3, -1, 32).tolist(), "q99": np.linspace(1, 3, 32).tolist()}}


def write_openpi(directory, model, dtype=torch.float32):
    directory.mkdir(parents=True)
    save_file({k: v.to(dtype) for k, v in real_keys(model).items()},
              str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps({
        "action_dim": 32, "action_horizon": 5, "paligemma_variant": "dummy",
        "action_expert_variant": "dummy", "precision": "float32"}))
    (directory / "assets" / "trossen").mkdir(parents=True)
    (directory / "assets" / "trossen" / "norm_stats.json").write_text(
        json.dumps({"norm_stats": STATS}))
    return directory


def write_lerobot(directory, model):
    directory.mkdir(parents=True)
    tensors = {"model." + k: v for k, v in real_keys(model).items()}
    # lerobot keeps the tied output head instead of the embedding, and an unused expert head
    tensors["model.paligemma_with_expert.paligemma.lm_head.weight"] = tensors.pop(
        "model." + LM + "embed_tokens.weight")
    tensors["model.paligemma_with_expert.gemma_expert.lm_head.weight"] = torch.randn(512, 48)
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps({
        "type": "pi05", "paligemma_variant": "dummy", "action_expert_variant": "dummy",
        "chunk_size": 5, "n_action_steps": 5, "max_state_dim": 32, "max_action_dim": 32,
        "num_inference_steps": 10, "tokenizer_max_length": 200}))
    save_file({"observation.state.q01": torch.full((8,), -2.0),
               "observation.state.q99": torch.full((8,), 2.0),
               "action.q01": torch.tensor(STATS["actions"]["q01"], dtype=torch.float32),
               "action.q99": torch.tensor(STATS["actions"]["q99"], dtype=torch.float32)},
              str(directory / "policy_postprocessor_step_0_unnormalizer_processor.safetensors"))
    return directory


@pytest.fixture(scope="module")
def reference():
    return Pi05Model(CONFIG, seed=11).eval()


def outputs(model):
    """Actions (fixed noise) and 16 greedy tokens for one fixed observation."""
    rng = np.random.default_rng(0)
    images = {c: rng.integers(0, 256, (28, 28, 3), dtype=np.uint8) for c in ("base", "left_wrist")}
    prefix = build_prefix(model.config, ("base", "left_wrist", "right_wrist"), images,
                          [2] + list(range(10, 60)))
    cache = KVCache.for_model(model.config, num_pages=64, page_size=16, dtype=model.dtype)
    table = model.prefill(prefix, cache)
    noise = torch.randn(1, 5, 32, generator=torch.Generator().manual_seed(0))
    actions = model.sample_actions([table], noise, cache)
    cache.reserve(table, 20)
    tokens = [int(model.extend(table, [5, 6, 7], cache).argmax())]
    for _ in range(15):
        tokens.append(int(model.decode([table], [tokens[-1]], cache)[0].argmax()))
    return actions, tokens


@pytest.mark.parametrize("layout", ["openpi", "lerobot"])
def test_both_layouts_load_into_a_model_that_computes_exactly_the_same(tmp_path, reference,
                                                                      layout):
    write = write_openpi if layout == "openpi" else write_lerobot
    directory = write(tmp_path / layout, reference)
    info = checkpoint.inspect(directory)
    assert info.format == layout
    assert info.config.vision == CONFIG.vision and info.config.vlm == CONFIG.vlm
    assert info.config.expert == CONFIG.expert and info.config.action_horizon == 5
    assert info.config.vocab_size == 512 and info.config.action_dim == 32
    expected_actions, expected_tokens = outputs(reference)
    for source in (directory, info):     # a path, or what inspect read of it
        model, _ = checkpoint.load(source)
        actions, tokens = outputs(model)
        assert torch.equal(actions, expected_actions)
        assert tokens == expected_tokens and len(set(tokens)) > 3


def test_weights_load_as_bfloat16_by_parameter(tmp_path, reference):
    directory = write_openpi(tmp_path / "ckpt", reference, dtype=torch.bfloat16)
    assert checkpoint.inspect(directory).dtypes == {"BF16": len(real_keys(reference))}
    model, _ = checkpoint.load(directory, dtype=torch.bfloat16)
    # as openpi's to_bfloat16_for_selected_params: vision embeddings and norms stay float32,
    # and the heads outside the VLM-with-expert, which it never casts
    kept = {name for name, p in model.named_parameters() if p.dtype == torch.float32}
    assert {f"{head}.weight" for head in FLOAT32_HEADS} <= kept
    assert all(("vision.embeddings." in n or "layernorm" in n or n.endswith("norm.weight")
                or "norm.dense" in n or n.split(".")[0] in FLOAT32_HEADS) for n in kept), kept
    assert model.expert.layers[0].mlp.up_proj.weight.dtype == model.dtype == torch.bfloat16
    model32, _ = checkpoint.load(directory, dtype=torch.float32)
    torch.testing.assert_close(model32.action_in_proj.weight,
                               reference.action_in_proj.weight.bfloat16().float())


@pytest.mark.parametrize("layout", ["openpi", "lerobot"])
def test_inspect_counts_the_weights_bytes_as_loading_gives_them(tmp_path, reference, layout):
    directory = (write_openpi if layout == "openpi" else write_lerobot)(tmp_path / "ckpt",
                                                                       reference)
    info = checkpoint.inspect(directory)
    for dtype in (torch.float32, torch.bfloat16):
        model, _ = checkpoint.load(directory, dtype=dtype)
        loaded = sum(p.numel() * p.element_size() for p in model.parameters())
        assert checkpoint.loaded_bytes(info, dtype) == loaded, (layout, dtype)
    # the parts kept in float32 make bfloat16 more than half of float32
    assert checkpoint.loaded_bytes(info, torch.bfloat16) > \
        checkpoint.loaded_bytes(info, torch.float32) / 2


def test_a_missing_key_is_named(tmp_path, reference):
    directory = write_openpi(tmp_path / "ckpt", reference)
    tensors = real_keys(reference)
    del tensors[EXPERT + "layers.1.mlp.up_proj.weight"]
    save_file(tensors, str(directory / "model.safetensors"))
    with pytest.raises(checkpoint.CheckpointError,
                       match=r"1 missing keys:\n  paligemma_with_expert\.gemma_expert\.model\."
                             r"layers\.1\.mlp\.up_proj\.weight"):
        checkpoint.load(directory)


def test_unexpected_keys_are_listed_unless_not_strict(tmp_path, reference):
    directory = write_openpi(tmp_path / "ckpt", reference)
    tensors = real_keys(reference) | {"state_proj.weight": torch.zeros(2, 2)}
    save_file(tensors, str(directory / "model.safetensors"))
    with pytest.raises(checkpoint.CheckpointError, match=r"1 unexpected keys:\n  state_proj"):
        checkpoint.load(directory)
    checkpoint.load(directory, strict=False)


def test_a_shape_mismatch_names_the_tensor(tmp_path, reference):
    directory = write_openpi(tmp_path / "ckpt", reference)
    tensors = real_keys(reference)
    tensors["time_mlp_out.bias"] = torch.zeros(47)
    save_file(tensors, str(directory / "model.safetensors"))
    with pytest.raises(checkpoint.CheckpointError,
                       match=r"tensor time_mlp_out\.bias has shape \[47\], the model needs \[48\]"):
        checkpoint.load(directory)


def test_weights_holding_nan_or_inf_are_refused_naming_the_tensors(tmp_path, reference):
    directory = write_openpi(tmp_path / "ckpt", reference)
    tensors = real_keys(reference)
    tensors["time_mlp_out.bias"][[3, 7]] = float("nan")
    tensors[LM + "norm.weight"][0] = float("-inf")
    save_file(tensors, str(directory / "model.safetensors"))
    for dtype in (torch.float32, torch.bfloat16):
        with pytest.raises(checkpoint.CheckpointError,
                           match=r"2 tensors hold NaN or inf, a corrupt or diverged checkpoint: "
                                 r".*time_mlp_out\.bias \(2 values\)"):
            checkpoint.load(directory, dtype=dtype)


def test_a_tensor_stored_as_integers_is_refused_from_the_header(tmp_path, reference):
    directory = write_openpi(tmp_path / "ckpt", reference)
    tensors = real_keys(reference)
    tensors["time_mlp_out.bias"] = torch.zeros(48, dtype=torch.int32)
    save_file(tensors, str(directory / "model.safetensors"))
    info = checkpoint.inspect(directory)
    with pytest.raises(checkpoint.CheckpointError, match=r"time_mlp_out\.bias is stored as I32"):
        checkpoint.match_tensors(info)
    with pytest.raises(checkpoint.CheckpointError, match="stored as I32"):
        checkpoint.load(directory)


def test_match_tensors_reads_the_header_alone(tmp_path, reference):
    directory = write_lerobot(tmp_path / "ckpt", reference)
    info = checkpoint.inspect(directory)
    matched = checkpoint.match_tensors(info)
    assert len(matched) == len(real_keys(reference))
    assert matched["model." + LM + "embed_tokens.weight"] == \
        "model.paligemma_with_expert.paligemma.lm_head.weight"   # lerobot's tied copy
    tensors = {"model." + k: v for k, v in real_keys(reference).items()}
    del tensors["model." + EXPERT + "layers.1.mlp.up_proj.weight"]
    save_file(tensors, str(directory / "model.safetensors"))
    with pytest.raises(checkpoint.CheckpointError, match=r"1 missing keys:\n  model\."):
        checkpoint.match_tensors(checkpoint.inspect(directory))


def test_a_head_not_tied_to_the_embedding_is_refused_by_inspect_and_load(tmp_path, reference):
    directory = write_lerobot(tmp_path / "ckpt", reference)
    tensors = {"model." + k: v for k, v in real_keys(reference).items()}
    head = "model.paligemma_with_expert.paligemma.lm_head.weight"
    tensors[head] = tensors["model." + LM + "embed_tokens.weight"].clone()
    tensors[head][7, 3] += 1.0
    save_file(tensors, str(directory / "model.safetensors"))
    info = checkpoint.inspect(directory)
    checkpoint.match_tensors(info)                      # the header alone cannot tell
    with pytest.raises(checkpoint.CheckpointError, match="lm_head.weight differs from"):
        checkpoint.check_tied(info, rows=4)             # blocks of 4 rows: row 7 in the second
    with pytest.raises(checkpoint.CheckpointError, match="must be tied to the embedding"):
        checkpoint.load(directory)


def test_a_tensor_the_model_ignores_is_not_read_whatever_its_dtype(tmp_path, reference):
    directory = write_lerobot(tmp_path / "ckpt", reference)
    tensors = {"model." + k: v for k, v in real_keys(reference).items()}
    tensors["model.paligemma_with_expert.paligemma.lm_head.weight"] = tensors.pop(
        "model." + LM + "embed_tokens.weight")
    tensors["model.paligemma_with_expert.gemma_expert.lm_head.weight"] = torch.randn(
        512, 48).to(torch.float8_e4m3fn)               # F8_E4M3: no dtype the loader maps
    save_file(tensors, str(directory / "model.safetensors"))
    model, _ = checkpoint.load(directory)
    loaded = model.state_dict()
    assert all(torch.equal(loaded[name], value) for name, value in reference.state_dict().items())


@pytest.mark.parametrize("setting, value, message", [
    ("chunk_size", 0, "chunk_size must be an integer of at least 1, not 0"),
    ("chunk_size", True, "chunk_size must be an integer of at least 1, not true"),
    ("num_inference_steps", None, "num_inference_steps must be an integer of at least 1, "
                                  "not null"),
    ("tokenizer_max_length", "fifty", 'tokenizer_max_length must be an integer of at least 1, '
                                      'not "fifty"'),
    ("max_state_dim", 31.5, "max_state_dim must be an integer of at least 1, not 31.5"),
    ("chunk_size", 1e300, "chunk_size must be at most 2147483647, not 1e+300"),
    ("tokenizer_max_length", 2**40, "tokenizer_max_length must be at most 2147483647, not "
                                    "1099511627776"),
    ("paligemma_variant", 5, "paligemma_variant must be a string, not 5"),
])
def test_config_json_settings_of_the_wrong_type_or_range_are_named(tmp_path, reference,
                                                                  setting, value, message):
    directory = write_lerobot(tmp_path / "ckpt", reference)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(config | {setting: value}))
    with pytest.raises(checkpoint.CheckpointError) as raised:
        checkpoint.inspect(directory)
    assert str(raised.value) == "config.json: " + message


def test_config_json_must_be_an_object(tmp_path, reference):
    directory = write_lerobot(tmp_path / "ckpt", reference)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text("[1, 2, 3]")
    with pytest.raises(checkpoint.CheckpointError, match="expected a JSON object of settings, "
                                                         "found a list"):
        checkpoint.inspect(directory)
    # a whole number written as a float is that integer
    (directory / "config.json").write_text(json.dumps(config | {"chunk_size": 7.0}))
    assert checkpoint.inspect(directory).config.action_horizon == 7
    # one that cannot be read is named, not a traceback
    (directory / "config.json").unlink()
    (directory / "config.json").mkdir()
    with pytest.raises(checkpoint.CheckpointError, match=r"config\.json: unreadable \(Is a "
                                                         r"directory\)"):
        checkpoint.inspect(directory)


def test_sharded_weights_are_named_as_such(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "model-00001-of-00002.safetensors"}}))
    with pytest.raises(checkpoint.CheckpointError, match="no model.safetensors; "
                       "model.safetensors.index.json says the weights are sharded, which this "
                       "loader does not read: merge the shards"):
        checkpoint.inspect(tmp_path)


def test_attention_shapes_must_fit_the_variant(tmp_path, reference):
    directory = write_openpi(tmp_path / "ckpt", reference)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(config | {"paligemma_variant": "gemma_2b"}))
    with pytest.raises(checkpoint.CheckpointError,
                       match="do not fit 8 heads, 1 kv heads, head_dim 256 \\(variant 'gemma_2b'\\)"):
        checkpoint.inspect(directory)
    unsaid = "\\(variant 'gemma_2b'; config.json names no paligemma_variant: the default\\)"
    (directory / "config.json").write_text("{}")
    with pytest.raises(checkpoint.CheckpointError, match=unsaid):
        checkpoint.inspect(directory)
    # heads config.json gives are named as config.json's, not the variant's
    (directory / "config.json").write_text(json.dumps(config | {
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16}))
    with pytest.raises(checkpoint.CheckpointError, match="do not fit 4 heads, 1 kv heads, "
                       "head_dim 16 \\(config.json's num_attention_heads, num_key_value_heads, "
                       "head_dim\\)"):
        checkpoint.inspect(directory)
    (directory / "config.json").write_text(json.dumps(config | {"type": "pi0"}))
    with pytest.raises(checkpoint.CheckpointError, match='type "pi0" is not π0.5'):
        checkpoint.inspect(directory)
    (directory / "config.json").write_text(json.dumps(config | {"pi05": False}))  # openpi's
    with pytest.raises(checkpoint.CheckpointError, match="pi05 false is not π0.5"):
        checkpoint.inspect(directory)
    (directory / "config.json").unlink()     # not the default's fault: the file is missing
    with pytest.raises(checkpoint.CheckpointError, match="no config.json beside "
                                                          "model.safetensors"):
        checkpoint.inspect(directory)


def test_truncated_and_foreign_files_are_refused_with_the_reason(tmp_path, reference):
    directory = write_openpi(tmp_path / "ckpt", reference)
    weights = directory / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(checkpoint.CheckpointError, match="not a readable safetensors file"):
        checkpoint.load(directory)
    weights.write_bytes(b"\x00" * 64 + b"definitely not a checkpoint")
    with pytest.raises(checkpoint.CheckpointError, match="truncated download or a file of another"):
        checkpoint.inspect(directory)


class Boom:
    def __reduce__(self):
        return (print, ("this pickle would run code",))


def test_pickle_files_are_never_unpickled(tmp_path, capsys):
    directory = tmp_path / "ckpt"
    directory.mkdir()
    (directory / "pytorch_model.bin").write_bytes(pickle.dumps(Boom()))
    with pytest.raises(checkpoint.CheckpointError, match=r"pytorch_model\.bin.*never loaded"):
        checkpoint.load(directory)
    with pytest.raises(checkpoint.CheckpointError, match="pickle checkpoints are never loaded"):
        checkpoint.load(directory / "pytorch_model.bin")
    (directory / "model.safetensors").write_bytes(pickle.dumps(Boom()))  # disguised
    with pytest.raises(checkpoint.CheckpointError, match="a pickle \\(torch.save\\) file under "
                                                         "a safetensors name"):
        checkpoint.load(directory)
    torch.save({"w": torch.zeros(2)}, directory / "model.safetensors")  # its zip archive
    with pytest.raises(checkpoint.CheckpointError, match="a pickle \\(torch.save\\) file"):
        checkpoint.load(directory)
    (directory / "model.safetensors").unlink()
    (directory / "pytorch_model.bin").rename(directory / "MODEL.PT")
    with pytest.raises(checkpoint.CheckpointError, match=r"MODEL\.PT.*never loaded"):
        checkpoint.load(directory)
    assert "would run code" not in capsys.readouterr().out


@pytest.mark.parametrize("layout", ["openpi", "lerobot"])
def test_normalization_applies_on_the_engines_input_and_output(tmp_path, reference, layout):
    write = write_openpi if layout == "openpi" else write_lerobot
    directory = write(tmp_path / layout, reference)
    loaded = load_model(checkpoint=str(directory), tokenizer=_tokenizer(tmp_path))
    engine = OxygenEngine(loaded.model, EngineConfig(num_pages=128, memory_period_s=0),
                          tokenizer=loaded.tokenizer, normalization=loaded.normalization,
                          calibrate=False)
    state = np.array([-2.0, 0.0, 1.0, 2.0, 3.0])
    rng = np.random.default_rng(0)
    images = {"base": rng.integers(0, 256, (28, 28, 3), dtype=np.uint8)}
    report = engine.step(Observation(images, state, "pick", 0.0))
    # the prompt carries the state normalized by the format's own formula (q01 = -2, q99 = 2)
    prompt = loaded.tokenizer.decode(
        engine.build_prefix(Observation(images, state, "pick", 0.0)).tokens.tolist())
    eps = 1e-6 if layout == "openpi" else 0.0
    normalized = (state + 2.0) / (4.0 + eps) * 2.0 - 1.0
    # openpi tokenizes the robot's 5 values before it pads them; lerobot pads to 32 first
    bins = " ".join(str(b) for b in discretize_state(normalized,
                                                     None if layout == "openpi" else 32))
    assert f"State: {bins};" in prompt
    assert len(bins.split()) == (5 if layout == "openpi" else 32)
    assert loaded.model.config.state_prompt == ("robot" if layout == "openpi" else "padded")
    assert f"state in the prompt: {loaded.model.config.state_prompt}" in loaded.description
    # a checkpoint trained without the state in its prompt (openpi's pi05_libero)
    bare = load_model(checkpoint=str(directory), tokenizer=_tokenizer(tmp_path),
                      state_prompt="none")
    plain = OxygenEngine(bare.model, EngineConfig(num_pages=128, memory_period_s=0),
                         tokenizer=bare.tokenizer, normalization=bare.normalization,
                         calibrate=False)
    tokens = plain.build_prefix(Observation(images, state, "pick", 0.0)).tokens.tolist()
    assert tokens == bare.tokenizer.encode("pick") + bare.tokenizer.encode("\n", bos=False)
    assert bins.startswith("0 127 " if layout == "openpi" else "0 128 ")  # eps matters
    raw = loaded.model.sample_actions(
        [loaded.model.prefill(engine.build_prefix(Observation(images, state, "pick", 0.0)),
                              engine.cache)], engine.actions.noise(0), engine.cache)[0].numpy()
    q01, q99 = np.array(STATS["actions"]["q01"]), np.array(STATS["actions"]["q99"])
    np.testing.assert_allclose(report.chunk.actions, (raw + 1) / 2 * (q99 - q01 + eps) + q01,
                               rtol=1e-5, atol=1e-5)


def _tokenizer(tmp_path):
    import sentencepiece

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(["Task: pick up the cup, State: 1 2 3;", "Action: move left",
                                 "the robot sees a red cup on the table"] * 50))
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(tmp_path / "sp"), vocab_size=290, hard_vocab_limit=False,
        byte_fallback=True, character_coverage=1.0, bos_id=2, eos_id=1, pad_id=0, unk_id=3,
        # like Gemma's tokenizer: text is kept as it is (newlines, spaces)
        normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=False, minloglevel=2)
    return str(tmp_path / "sp.model")


def test_a_real_size_pi05_manifest_matches_what_the_loader_expects():
    with torch.device("meta"):
        model = Pi05Model(preset("pi05"))
    manifest = checkpoint.expected_keys(model)
    assert len(manifest) == 811  # 437 vision + 2 projector + 164 language + 200 expert + 8
    known = {  # facts of real π0.5 checkpoints (openpi's converter and lerobot's fixer)
        VIT + "embeddings.patch_embedding.weight": (1152, 3, 14, 14),
        VIT + "embeddings.position_embedding.weight": (256, 1152),
        VIT + "encoder.layers.26.mlp.fc1.weight": (4304, 1152),
        VIT + "encoder.layers.26.self_attn.out_proj.bias": (1152,),
        "paligemma_with_expert.paligemma.model.multi_modal_projector.linear.weight": (2048, 1152),
        LM + "embed_tokens.weight": (257152, 2048),
        LM + "layers.17.self_attn.q_proj.weight": (2048, 2048),
        LM + "layers.17.self_attn.k_proj.weight": (256, 2048),
        LM + "layers.17.mlp.gate_proj.weight": (16384, 2048),
        LM + "layers.0.input_layernorm.weight": (2048,),
        LM + "norm.weight": (2048,),
        EXPERT + "layers.17.self_attn.q_proj.weight": (2048, 1024),
        EXPERT + "layers.17.self_attn.o_proj.weight": (1024, 2048),
        EXPERT + "layers.0.input_layernorm.dense.weight": (3072, 1024),
        EXPERT + "layers.0.post_attention_layernorm.dense.bias": (3072,),
        EXPERT + "norm.dense.weight": (3072, 1024),
        "action_in_proj.weight": (1024, 32),
        "action_out_proj.weight": (32, 1024),
        "time_mlp_in.weight": (1024, 1024),
        "time_mlp_out.bias": (1024,),
    }
    for key, shape in known.items():
        assert manifest[key] == shape, key
    assert not any(".weight" not in k and ".bias" not in k for k in manifest)
    lerobot = checkpoint.expected_keys(model, prefix="model.")
    assert set(lerobot) == {"model." + k for k in manifest}
    params = sum(int(np.prod(s)) for s in manifest.values())
    assert 3.2e9 < params < 3.8e9


def test_the_paligemma_tokenizer_round_trips_text_and_the_pi05_prompt(tmp_path):
    from oxygen_ros.model.prompt import pi05_prompt
    from oxygen_ros.model.tokenizer import PaliGemmaTokenizer

    tokenizer = PaliGemmaTokenizer(_tokenizer(tmp_path))
    prompt = pi05_prompt("pick up the cup", np.array([0.0, 1.0]), 4)
    ids = tokenizer.encode(prompt)
    assert ids[0] == tokenizer.bos_id and tokenizer.decode(ids) == prompt
    assert tokenizer.decode(tokenizer.encode("grüß 🤖", bos=False)) == "grüß 🤖"  # byte fallback
    stream = tokenizer.stream()
    assert "".join([stream.push(i) for i in tokenizer.encode("the red cup", bos=False)]
                   + [stream.flush()]) == "the red cup"
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        PaliGemmaTokenizer(str(tmp_path / "corpus.txt"))
    with pytest.raises(ValueError, match="needs the PaliGemma tokenizer"):
        PaliGemmaTokenizer("")


def test_presets_still_use_the_byte_tokenizer():
    loaded = load_model(preset="tiny")
    assert isinstance(loaded.tokenizer, ByteTokenizer) and loaded.normalization.state is None


def test_inspect_command_prints_format_dims_parameters_and_memory(tmp_path, reference):
    import subprocess
    import sys

    directory = write_lerobot(tmp_path / "ckpt", reference)
    command = [sys.executable, "-m", "oxygen_ros.cli", "inspect", str(directory),
               "--kv-pages", "1000", "--dtype", "float32"]
    # a π0.5 checkpoint runs with the PaliGemma tokenizer only, as the node refuses it
    untokenized = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert untokenized.returncode == 2
    assert "needs the PaliGemma tokenizer" in untokenized.stderr, untokenized.stderr
    tokenizer = _tokenizer(tmp_path)
    result = subprocess.run(command + ["--tokenizer", tokenizer], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"tokenizer   PaliGemma SentencePiece {tokenizer} (" in result.stdout
    params = sum(p.numel() for p in reference.parameters())
    assert "(lerobot layout)" in result.stdout
    assert f"parameters  {params / 1e6:.1f} M, stored as" in result.stdout
    assert "vision      2 layers x 144 wide" in result.stdout and "horizon 5 x 32" in result.stdout
    kv = 1000 * 16 * reference.config.kv_bytes_per_token(4)
    assert f"KV pool 1000 pages x 16 tokens = {kv / 2**20:.1f} MiB" in result.stdout
    weights = sum(p.numel() * 4 for p in reference.parameters())
    assert f"weights {weights / 2**20:.1f} MiB" in result.stdout
    assert "every tensor the model needs, in its shape" in result.stdout
    assert "statistics  lerobot" in result.stdout and "; state 8 dims; actions 32 dims" \
        in result.stdout
    assert "prompt      state padded (padded to max_state_dim 32), at most 200 tokens" \
        in result.stdout
    bare = subprocess.run(command + ["--tokenizer", tokenizer, "--state-prompt", "none"],
                          capture_output=True, text=True, timeout=120)
    assert "prompt      state none, at most 200 tokens" in bare.stdout, bare.stderr
    # a pool the node would refuse: three cameras' 4 image tokens and a 200-token prompt
    small = subprocess.run(command[:5] + ["--kv-pages", "14", "--tokenizer", tokenizer],
                           capture_output=True, text=True, timeout=120)
    assert small.returncode == 2
    assert ("num_pages=14 cannot hold 1 robot(s)' newest observation prefix(es) of 212 tokens "
            "beside one request whole (its own frame's prefix, 304 prompt and answer tokens): "
            "48 pages of 16; raise num_pages to 48" in small.stderr), small.stderr
    bad = subprocess.run([sys.executable, "-m", "oxygen_ros.cli", "inspect", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "no model.safetensors" in bad.stderr
    # a tensor the model needs is missing: inspect says so, as loading would
    tensors = {"model." + k: v for k, v in real_keys(reference).items()}
    del tensors["model.time_mlp_out.bias"]
    save_file(tensors, str(directory / "model.safetensors"))
    bad = subprocess.run([sys.executable, "-m", "oxygen_ros.cli", "inspect", str(directory)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "1 missing keys:\n  model.time_mlp_out.bias" in bad.stderr


def test_inspect_picks_statistics_as_the_node_does(tmp_path, reference):
    """--asset-id and --normalization identity stand for the node's parameters: a checkpoint
    the node runs with them is not refused."""
    import shutil
    import subprocess
    import sys

    def inspect(*args):
        return subprocess.run([sys.executable, "-m", "oxygen_ros.cli", "inspect",
                               str(directory), "--tokenizer", tokenizer, *args],
                              capture_output=True, text=True, timeout=120)

    tokenizer = _tokenizer(tmp_path)

    directory = write_openpi(tmp_path / "ckpt", reference)
    shutil.copytree(directory / "assets" / "trossen", directory / "assets" / "aloha")
    two = inspect()
    assert two.returncode == 2 and "asset_id" in two.stderr, two.stderr
    picked = inspect("--asset-id", "aloha")
    assert picked.returncode == 0, picked.stderr
    assert "statistics  openpi" in picked.stdout and "aloha" in picked.stdout, picked.stdout
    unknown = inspect("--asset-id", "droid")
    assert unknown.returncode == 2
    assert "no asset_id 'droid'; its statistics are ['aloha', 'trossen']" in unknown.stderr
    shutil.rmtree(directory / "assets")
    assert inspect().returncode == 2
    identity = inspect("--normalization", "identity")
    assert identity.returncode == 0, identity.stderr
    assert "statistics  identity (normalization: identity)" in identity.stdout
    directory = write_lerobot(tmp_path / "lerobot", reference)   # keeps one set: no asset_id
    chosen = inspect("--asset-id", "aloha")
    assert chosen.returncode == 2 and "leave asset_id empty" in chosen.stderr, chosen.stderr


@pytest.mark.ros
def test_the_inference_node_runs_a_checkpoint_given_by_parameters(tmp_path, reference,
                                                                  rclpy_context):
    from oxygen_ros.ros.inference_node import InferenceNode

    directory = write_openpi(tmp_path / "ckpt", reference)
    args = ["--ros-args", "-p", f"checkpoint:={directory}", "-p",
            f"tokenizer:={_tokenizer(tmp_path)}", "-p", "asset_id:=trossen", "-p",
            "dtype:=bfloat16", "-p", "action_dt_s:=0.1"]
    # the statistics cover 8 state values and 32 action dimensions, the robot has 14 joints
    with pytest.raises(ValueError, match=r"14 joint_names, but the state statistics \(openpi "
                                         r".*\) have 8 dimensions: list the joints"):
        InferenceNode(context=rclpy_context, cli_args=args)
    stats = {"q01": [-2.0] * 14, "q99": [2.0] * 14, "mean": [0.0] * 14, "std": [1.0] * 14}
    (directory / "assets" / "trossen" / "norm_stats.json").write_text(
        json.dumps({"norm_stats": {"state": stats, "actions": stats}}))
    node = InferenceNode(context=rclpy_context, cli_args=args)
    try:
        assert node.model.description.startswith(f"openpi checkpoint {directory}")
        assert "assets/trossen/norm_stats.json (quantile)" in node.model.description
        assert node.engine.model.dtype == torch.bfloat16
        rng = np.random.default_rng(0)
        images = {"base": rng.integers(0, 256, (28, 28, 3), dtype=np.uint8)}
        report = node.engine.step(Observation(images, np.zeros(14), "pick", 0.0))
        assert report.chunk.actions.shape == (5, 32) and np.isfinite(report.chunk.actions).all()
    finally:
        node.destroy_node()


# -- checkpoints that lie or leave things out ---------------------------------------------

def test_bfloat16_actions_track_float32_within_tolerance(tmp_path, reference):
    """Mixed precision as the reference implementations run it: the bf16 chunk stays
    within 0.1 (normalized action units, values of order 1) of the float32 one."""
    for layout, write in (("openpi", write_openpi), ("lerobot", write_lerobot)):
        directory = write(tmp_path / layout, reference)
        model32, _ = checkpoint.load(directory, dtype=torch.float32)
        model16, info = checkpoint.load(directory, dtype=torch.bfloat16)
        kept = {n for n, p in model16.named_parameters() if p.dtype == torch.float32}
        if layout == "lerobot":   # the whole vision path and the projector stay float32
            assert all(n in kept for n, _ in model16.vision.named_parameters(prefix="vision"))
            assert "projector.weight" in kept
        actions32, _ = outputs(model32)
        actions16, _ = outputs(model16)
        error = (actions16.float() - actions32).abs()
        assert error.max() < 0.1, (layout, error.max())


def test_a_lerobot_checkpoint_without_its_statistics_is_an_error_naming_the_files(
        tmp_path, reference):
    directory = write_lerobot(tmp_path / "ckpt", reference)
    for stats in directory.glob("*normalizer_processor*"):
        stats.unlink()
    with pytest.raises(ValueError, match="normalizer_processor.*normalized units"):
        load_model(checkpoint=str(directory), tokenizer=_tokenizer(tmp_path))
    loaded = load_model(checkpoint=str(directory), tokenizer=_tokenizer(tmp_path),
                        normalization="identity")
    assert "identity" in loaded.description and loaded.normalization.actions is None


def test_an_openpi_checkpoint_without_norm_stats_is_an_error(tmp_path, reference):
    directory = write_openpi(tmp_path / "ckpt", reference)
    (directory / "assets" / "trossen" / "norm_stats.json").unlink()
    with pytest.raises(ValueError, match="norm_stats.json: no normalization statistics"):
        load_model(checkpoint=str(directory), tokenizer=_tokenizer(tmp_path))


@pytest.mark.parametrize("layout", ["openpi", "lerobot"])
def test_statistics_wider_than_the_model_are_refused(tmp_path, reference, layout):
    """A config.json max_state_dim below the statistics' state width: the model would read a
    cut state (the statistics say what the robot sends)."""
    directory = (write_openpi if layout == "openpi" else write_lerobot)(tmp_path / "ckpt",
                                                                        reference)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(config | {"max_state_dim": 3}))
    with pytest.raises(ValueError, match="statistics of 8 state dimensions, but the model "
                                         r"takes 3 \(config.json max_state_dim\)"):
        load_model(checkpoint=str(directory), tokenizer=_tokenizer(tmp_path))
    import subprocess
    import sys
    inspected = subprocess.run([sys.executable, "-m", "oxygen_ros.cli", "inspect",
                                str(directory), "--tokenizer", _tokenizer(tmp_path)],
                               capture_output=True, text=True, timeout=120)
    assert inspected.returncode == 2 and "8 state dimensions" in inspected.stderr, inspected


def test_an_unknown_variant_needs_explicit_heads_and_loads_with_them(tmp_path, reference):
    directory = write_lerobot(tmp_path / "ckpt", reference)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(config | {
        "paligemma_variant": "gemma_custom", "action_expert_variant": "gemma_custom"}))
    with pytest.raises(checkpoint.CheckpointError,
                       match="unknown paligemma variant 'gemma_custom'.*attention_heads"):
        checkpoint.inspect(directory)
    info = checkpoint.inspect(directory, heads=(8, 1, 16))
    assert (info.config.vlm.num_heads, info.config.vlm.num_kv_heads,
            info.config.vlm.head_dim) == (8, 1, 16)
    with pytest.raises(checkpoint.CheckpointError, match="do not fit"):
        checkpoint.inspect(directory, heads=(4, 1, 16))
    (directory / "config.json").write_text(json.dumps(config | {
        "paligemma_variant": "gemma_custom", "num_attention_heads": 8,
        "num_key_value_heads": 1, "head_dim": 16}))
    model, _ = checkpoint.load(directory)
    assert torch.equal(outputs(model)[0], outputs(reference)[0])


def test_a_vision_width_with_no_head_count_is_refused_at_load(tmp_path):
    narrow = CONFIG.with_(vision=VisionConfig(image_size=28, patch_size=14, width=32, depth=1,
                                              mlp_dim=64, num_heads=2))
    directory = write_openpi(tmp_path / "ckpt", Pi05Model(narrow, seed=1).eval())
    with pytest.raises(checkpoint.CheckpointError, match="vision width of 32.*vision_heads"):
        checkpoint.inspect(directory)
    assert checkpoint.inspect(directory, vision_heads=2).config.vision.num_heads == 2
    with pytest.raises(checkpoint.CheckpointError,
                       match="3 vision heads do not divide the vision width 32"):
        checkpoint.inspect(directory, vision_heads=3)


def test_the_shipped_demo_model_loads_by_package_url_and_matches_its_manifest():
    import hashlib
    import json

    from oxygen_ros.model.loading import load_model, resolve
    from oxygen_ros.model.tokenizer import ByteTokenizer

    directory = resolve("package://oxygen_ros/models/demo")
    manifest = json.loads((directory / "manifest.json").read_text())
    digest = hashlib.sha256((directory / "model.safetensors").read_bytes()).hexdigest()
    assert digest == manifest["model_safetensors_sha256"]
    assert (directory / "model.safetensors").stat().st_size <= 20 * 1024 * 1024
    loaded = load_model(checkpoint="package://oxygen_ros/models/demo")
    assert isinstance(loaded.tokenizer, ByteTokenizer)
    assert loaded.model.config.action_dim == 14 and loaded.model.config.vision.image_size == 84
    assert sum(p.numel() for p in loaded.model.parameters()) == manifest["parameters"]
    assert loaded.normalization.actions is not None
    with pytest.raises(ValueError, match="package://oxygen_ros"):
        resolve("package://other_pkg/models/demo")


def test_a_device_this_torch_cannot_run_on_is_refused_saying_why():
    """The node's configure says why instead of torch's 'not compiled with CUDA'."""
    from oxygen_ros.model.loading import load_model

    with pytest.raises(ValueError, match=re.escape("device tpu: expected cpu, cuda or cuda:N")):
        load_model(preset="tiny", device="tpu")
    reason = (f"this machine has {torch.cuda.device_count()} CUDA device(s), cuda:0 up"
              if torch.cuda.is_available() else "this torch cannot use CUDA")
    with pytest.raises(ValueError, match=re.escape(f"device cuda:99: {reason}")):
        load_model(preset="tiny", device="cuda:99")
