"""Import π0.5 checkpoints: the openpi PyTorch layout and the lerobot `pi05` layout.

Both store one `model.safetensors` (loaded with safetensors only — never unpickled) with
the module tree of openpi's PaliGemmaWithExpertModel; lerobot nests it under `model.`.
Dimensions come from the tensors themselves (widths, depths, MLP sizes, vocabulary,
vision patch and image size, action dim) and from the Gemma variant names in config.json
(heads, kv heads, head_dim), and are checked against each other. Loading is strict:
missing or unexpected keys are an error that lists them; every shape is checked.
"""

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from oxygen_ros.model.config import GemmaConfig, ModelConfig, VisionConfig
from oxygen_ros.model.pi05 import FLOAT32_HEADS, Pi05Model
from oxygen_ros.model.safetensors_file import mapped_tensors
from oxygen_ros.model.weights_file import CheckpointError, open_weights, weights_file

# openpi's gemma.get_config: attention shapes of each Gemma variant
VARIANT_HEADS = {"dummy": (8, 1, 16), "gemma_300m": (8, 1, 256), "gemma_2b": (8, 1, 256),
                 "gemma_300m_lora": (8, 1, 256), "gemma_2b_lora": (8, 1, 256)}
SIGLIP_HEAD_DIMS = (72, 64)   # So400m/14 (1152 wide, 16 heads), then SigLIP B/L
# In bfloat16 the reference implementations keep these parameters in float32 (selectors
# matched against checkpoint keys, as their to_bfloat16_for_selected_params does), and the
# heads outside the VLM-with-expert, which that cast never reaches.
KEEP_FLOAT32 = {
    "openpi": ("vision_tower.vision_model.embeddings.patch_embedding.weight",
               "vision_tower.vision_model.embeddings.patch_embedding.bias",
               "vision_tower.vision_model.embeddings.position_embedding.weight",
               "input_layernorm", "post_attention_layernorm", "model.norm") + FLOAT32_HEADS,
    "lerobot": ("vision_tower", "multi_modal_projector", "input_layernorm",
                "post_attention_layernorm", "model.norm") + FLOAT32_HEADS,
}
# stored by the reference implementations, not used for inference
IGNORED = ("paligemma_with_expert.gemma_expert.lm_head.weight",)
TIED_HEAD = "paligemma_with_expert.paligemma.lm_head.weight"
FLOAT_DTYPES = ("F32", "BF16", "F16", "F64")    # stored dtypes a parameter may have
EMBEDDING = "paligemma_with_expert.paligemma.model.language_model.embed_tokens.weight"


@dataclass
class Checkpoint:
    path: Path
    format: str                      # "openpi" or "lerobot"
    prefix: str                      # "" (openpi) or "model." (lerobot)
    config: ModelConfig
    raw_config: dict
    num_parameters: int
    shapes: dict[str, tuple[int, ...]]   # key -> stored shape
    stored_dtypes: dict[str, str]        # key -> stored dtype (safetensors name)

    @property
    def dtypes(self) -> dict[str, int]:
        """Stored dtype -> number of tensors."""
        return dict(Counter(self.stored_dtypes.values()))


# -- key mapping -------------------------------------------------------------------------
_MODULES = (("vision.", "paligemma_with_expert.paligemma.model.vision_tower.vision_model."),
            ("projector.", "paligemma_with_expert.paligemma.model.multi_modal_projector.linear."),
            ("language_model.", "paligemma_with_expert.paligemma.model.language_model."),
            ("expert.", "paligemma_with_expert.gemma_expert.model."))


def checkpoint_key(name: str, prefix: str = "") -> str:
    """Our parameter name -> its key in an openpi (prefix "") or lerobot ("model.") file."""
    for ours, theirs in _MODULES:
        if name.startswith(ours):
            return prefix + theirs + name[len(ours):]
    return prefix + name     # action_in_proj, action_out_proj, time_mlp_in, time_mlp_out


def expected_keys(model: Pi05Model, prefix: str = "") -> dict[str, tuple[int, ...]]:
    """Checkpoint key -> shape for every parameter (works on the meta device)."""
    return {checkpoint_key(n, prefix): tuple(p.shape) for n, p in model.named_parameters()}


# -- reading -----------------------------------------------------------------------------
def _shapes(handle) -> dict[str, tuple[int, ...]]:
    return {key: tuple(handle.get_slice(key).get_shape()) for key in handle.keys()}


def _detect(shapes: dict, raw: dict) -> tuple[str, str]:
    if raw.get("type", "pi05") != "pi05" or raw.get("pi05", True) is not True:
        said = (f"type {json.dumps(raw['type'])}" if raw.get("type", "pi05") != "pi05"
                else f"pi05 {json.dumps(raw['pi05'])}")
        raise CheckpointError(f"config.json: {said} is not π0.5: this loader runs π0.5 "
                              "checkpoints only (lerobot's type pi05, openpi's PyTorch pi05)")
    lerobot_keys = any(k.startswith("model.paligemma_with_expert.") for k in shapes)
    openpi_keys = any(k.startswith("paligemma_with_expert.") for k in shapes)
    if raw.get("type") == "pi05" or (lerobot_keys and not openpi_keys):
        return "lerobot", "model."
    if openpi_keys:
        return "openpi", ""
    raise CheckpointError("unrecognized checkpoint: no paligemma_with_expert.* tensors "
                          "(expected the openpi PyTorch or lerobot pi05 layout)")


def _count_layers(shapes: dict, stem: str) -> int:
    pattern = re.compile(re.escape(stem) + r"(\d+)\.")
    indices = {int(m.group(1)) for k in shapes if (m := pattern.match(k))}
    if not indices:
        raise CheckpointError(f"no layers under {stem}*")
    if indices != set(range(max(indices) + 1)):
        raise CheckpointError(f"layers under {stem}* are not numbered 0..{max(indices)}: "
                              f"missing {sorted(set(range(max(indices) + 1)) - indices)}")
    return max(indices) + 1


def _shape(shapes: dict, key: str) -> tuple[int, ...]:
    if key not in shapes:
        raise CheckpointError(f"missing tensor {key}")
    return shapes[key]


HEAD_FIELDS = ("num_attention_heads", "num_key_value_heads", "head_dim")


LARGEST_SETTING = 2**31 - 1      # a dimension or count past int32 is no checkpoint's


def _config_int(raw: dict, key: str, default: int, least: int = 1) -> int:
    """config.json's integer `key` (`default` where absent), at least `least`; anything else
    (a string, a fraction, true, null) is an error naming the key."""
    value = raw.get(key, default)
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int or value < least:
        raise CheckpointError(f"config.json: {key} must be an integer of at least {least}, "
                              f"not {json.dumps(value)}")
    if value > LARGEST_SETTING:
        raise CheckpointError(f"config.json: {key} must be at most {LARGEST_SETTING}, not "
                              f"{json.dumps(raw[key])}")
    return value


def _config_str(raw: dict, key: str, default: str) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str):
        raise CheckpointError(f"config.json: {key} must be a string, not {json.dumps(value)}")
    return value


def _heads(variant: str, raw: dict, explicit: Optional[tuple],
           role: str) -> tuple[tuple[int, ...], str]:
    """(heads, kv heads, head_dim) and where they come from: given explicitly, else
    config.json's fields, else the variant's table entry; an unknown variant without them
    is an error naming them."""
    if explicit and any(explicit):
        if not all(explicit):
            raise CheckpointError("give all three of attention_heads, attention_kv_heads and "
                                  "attention_head_dim (or none)")
        return tuple(explicit), "the attention_* parameters"
    if all(field in raw for field in HEAD_FIELDS):
        return (tuple(_config_int(raw, field, 0) for field in HEAD_FIELDS),
                f"config.json's {', '.join(HEAD_FIELDS)}")
    if variant not in VARIANT_HEADS:
        raise CheckpointError(
            f"unknown {role} variant {variant!r} (known: {', '.join(VARIANT_HEADS)}): its "
            "attention shape cannot be read from the tensors; set the node parameters "
            "attention_heads, attention_kv_heads and attention_head_dim (or "
            f"{', '.join(HEAD_FIELDS)} in config.json)")
    key = role.replace(" ", "_") + "_variant"
    unsaid = "" if key in raw else f"; config.json names no {key}: the default"
    return VARIANT_HEADS[variant], f"variant {variant!r}{unsaid}"


def _gemma(shapes: dict, stem: str, variant: str, role: str, raw: dict,
           explicit: Optional[tuple] = None) -> GemmaConfig:
    (heads, kv_heads, head_dim), source = _heads(variant, raw, explicit, role)
    if min(heads, kv_heads, head_dim) < 1 or heads % kv_heads:
        raise CheckpointError(f"{role}: {heads} heads, {kv_heads} kv heads, head_dim "
                              f"{head_dim} is not an attention shape")
    q = _shape(shapes, f"{stem}layers.0.self_attn.q_proj.weight")
    k = _shape(shapes, f"{stem}layers.0.self_attn.k_proj.weight")
    gate = _shape(shapes, f"{stem}layers.0.mlp.gate_proj.weight")
    if q[0] != heads * head_dim or k[0] != kv_heads * head_dim:
        raise CheckpointError(
            f"{stem}layers.0.self_attn: q/k projections {q} / {k} do not fit {heads} heads, "
            f"{kv_heads} kv heads, head_dim {head_dim} ({source})")
    return GemmaConfig(width=q[1], depth=_count_layers(shapes, f"{stem}layers."),
                       mlp_dim=gate[0], num_heads=heads, num_kv_heads=kv_heads,
                       head_dim=head_dim)


def read_config(shapes: dict, raw: dict, prefix: str, heads: Optional[tuple] = None,
                vision_heads: int = 0) -> ModelConfig:
    """The model configuration a checkpoint implies (tensor shapes + config.json), with
    attention shapes given explicitly where the variant names do not say them."""
    root = prefix + "paligemma_with_expert."
    vision_stem = root + "paligemma.model.vision_tower.vision_model."
    patch = _shape(shapes, vision_stem + "embeddings.patch_embedding.weight")   # [W, 3, P, P]
    positions = _shape(shapes, vision_stem + "embeddings.position_embedding.weight")
    fc1 = _shape(shapes, vision_stem + "encoder.layers.0.mlp.fc1.weight")
    side = round(positions[0] ** 0.5)
    if side * side != positions[0]:
        raise CheckpointError(f"{vision_stem}embeddings.position_embedding.weight: "
                              f"{positions[0]} positions is not a square grid")
    width = patch[0]
    given = vision_heads or _config_int(raw, "vision_num_attention_heads", 0, 0)
    if given and width % given:
        raise CheckpointError(f"{vision_stem}: {given} vision heads do not divide the vision "
                              f"width {width}")
    vision_heads = given or next((width // d for d in SIGLIP_HEAD_DIMS if width % d == 0), 0)
    if not vision_heads:
        raise CheckpointError(
            f"{vision_stem}: a vision width of {width} has no SigLIP head count "
            f"({' or '.join(str(d) for d in SIGLIP_HEAD_DIMS)} per head) — set the node "
            "parameter vision_heads (or vision_num_attention_heads in config.json)")
    vision = VisionConfig(image_size=side * patch[2], patch_size=patch[2], width=width,
                          depth=_count_layers(shapes, vision_stem + "encoder.layers."),
                          mlp_dim=fc1[0], num_heads=vision_heads)
    variant = _config_str(raw, "paligemma_variant", "gemma_2b")
    vlm = _gemma(shapes, root + "paligemma.model.language_model.", variant, "paligemma", raw,
                 heads)
    expert = _gemma(shapes, root + "gemma_expert.model.",
                    _config_str(raw, "action_expert_variant", "gemma_300m"), "action expert",
                    raw, heads)
    embedding = shapes.get(prefix + EMBEDDING) or shapes.get(prefix + TIED_HEAD)
    if embedding is None:
        raise CheckpointError(f"missing tensor {prefix + EMBEDDING} (nor its tied copy "
                              f"{prefix + TIED_HEAD})")
    action_in = _shape(shapes, prefix + "action_in_proj.weight")                # [We, A]
    horizon_key = "action_horizon" if "action_horizon" in raw else "chunk_size"
    settings = {"action_horizon": _config_int(raw, horizon_key, 50),
                "num_denoise_steps": _config_int(raw, "num_inference_steps", 10),
                "max_prompt_tokens": _config_int(raw, "tokenizer_max_length", 200),
                "state_dim": _config_int(raw, "max_state_dim", 32),
                # openpi tokenizes the robot's state before padding it; lerobot pads first
                "state_prompt": "padded" if prefix else "robot"}
    try:
        return ModelConfig(
            vision=vision, vlm=vlm, expert=expert, vocab_size=embedding[0], num_cameras=3,
            action_dim=action_in[1], **settings,
            tokenizer="bytes" if raw.get("tokenizer") == "bytes" else "paligemma",
            name=f"checkpoint:{variant}")
    except ValueError as error:
        raise CheckpointError(f"inconsistent checkpoint: {error}") from None


def inspect(path: str | Path, heads: Optional[tuple] = None, vision_heads: int = 0) -> Checkpoint:
    """Format, dimensions and contents of a checkpoint, without loading its weights."""
    weights = weights_file(Path(path))
    with open_weights(weights) as handle:
        shapes = _shapes(handle)
        stored_dtypes = {key: handle.get_slice(key).get_dtype() for key in handle.keys()}
    config_file = weights.parent / "config.json"
    if not config_file.exists():
        raise CheckpointError(f"{weights.parent}: no config.json beside {weights.name} "
                              "(openpi and lerobot write one: it names the model's variants)")
    try:
        raw = json.loads(config_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{config_file}: invalid JSON ({error})") from None
    except OSError as error:
        raise CheckpointError(f"{config_file}: unreadable ({error.strerror or error})") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{config_file}: expected a JSON object of settings, "
                              f"found a {type(raw).__name__}")
    fmt, prefix = _detect(shapes, raw)
    config = read_config(shapes, raw, prefix, heads, vision_heads)
    params = sum(math.prod(s) for k, s in shapes.items()
                 if k[len(prefix):] not in IGNORED and k[len(prefix):] != TIED_HEAD)
    return Checkpoint(weights, fmt, prefix, config, raw, params, shapes, stored_dtypes)


def load(path: str | Path | Checkpoint, device: str | torch.device = "cpu",
         dtype: torch.dtype = torch.float32, prefix_attention: Optional[str] = None,
         strict: bool = True, heads: Optional[tuple] = None, vision_heads: int = 0,
         state_prompt: str = "") -> tuple[Pi05Model, Checkpoint]:
    """Build the model a checkpoint describes and fill it with the checkpoint's tensors,
    memory-mapped (model/safetensors_file.py). In bfloat16 the parameters its reference
    implementation keeps in float32 stay so. `state_prompt` overrides how the layout puts
    the state in the prompt. `path` may be what `inspect` returned for it (heads and
    vision_heads then as they were inspected)."""
    info = path if isinstance(path, Checkpoint) else inspect(path, heads, vision_heads)
    config = info.config
    if prefix_attention:
        config = config.with_(prefix_attention=prefix_attention)
    if state_prompt:
        config = config.with_(state_prompt=state_prompt)
    with torch.device("meta"):
        model = Pi05Model(config)
    source = match_tensors(info, model, strict)
    by_key = {checkpoint_key(name, info.prefix): name for name, _ in model.named_parameters()}
    check_tied(info)
    stored = mapped_tensors(info.path, set(source.values()))   # what it ignores is not read
    state, non_finite = {}, {}
    for key, stored_key in source.items():
        # a tensor stored as it will run stays a view of the file's pages (no copy)
        state[by_key[key]] = stored[stored_key].to(device=device,
                                                   dtype=loaded_dtype(info, key, dtype))
        count = _non_finite(state[by_key[key]])
        if count:
            non_finite[stored_key] = count
    if non_finite:
        named = ", ".join(f"{key} ({count} values)" for key, count in list(non_finite.items())[:5])
        raise CheckpointError(f"{info.path}: {len(non_finite)} tensors hold NaN or inf, a "
                              f"corrupt or diverged checkpoint: {named}")
    model.load_state_dict(state, assign=True)
    model.weights_version = f"checkpoint:{info.path.resolve()}:{info.path.stat().st_mtime_ns}"
    return model.eval(), info


def _non_finite(tensor: torch.Tensor, block: int = 1 << 24) -> int:
    """How many values of `tensor` are NaN or inf (read in blocks: no full-size mask)."""
    flat = tensor.reshape(-1)
    return sum(int((~torch.isfinite(flat[start:start + block])).sum())
               for start in range(0, flat.numel(), block))


def check_tied(info: Checkpoint, rows: int = 4096) -> None:
    """A file that keeps both the embedding and the output head (lerobot) must keep them
    equal, as π0.5 ties them: a CheckpointError otherwise (compared in blocks of rows)."""
    embedding, tied = info.prefix + EMBEDDING, info.prefix + TIED_HEAD
    if embedding not in info.shapes or tied not in info.shapes:
        return
    stored = mapped_tensors(info.path, (embedding, tied))
    head, table = stored[tied], stored[embedding]
    if head.shape != table.shape or not all(
            torch.equal(head[i:i + rows].float(), table[i:i + rows].float())
            for i in range(0, len(table), rows)):
        raise CheckpointError(f"{info.path}: {tied} differs from {embedding}; the output head "
                              "must be tied to the embedding")


def loaded_dtype(info: Checkpoint, key: str, dtype: torch.dtype) -> torch.dtype:
    """The dtype load() gives the parameter under `key`: float32 where the reference
    implementation keeps it so in bfloat16, else dtype."""
    keep = KEEP_FLOAT32[info.format] if dtype == torch.bfloat16 else ()
    return torch.float32 if any(selector in key[len(info.prefix):] for selector in keep) \
        else dtype


def loaded_bytes(info: Checkpoint, dtype: torch.dtype) -> int:
    """The bytes of the weights load() gives the model in dtype (the parts kept in float32
    counted so), from the file's header alone."""
    return sum(math.prod(info.shapes[stored]) * loaded_dtype(info, key, dtype).itemsize
               for key, stored in match_tensors(info).items())


def match_tensors(info: Checkpoint, model: Optional[Pi05Model] = None,
                  strict: bool = True) -> dict[str, str]:
    """The stored key of each parameter the model needs (key -> stored key), read from the
    file's header alone; a CheckpointError names the missing and (when strict) unexpected
    keys, a tensor of the wrong shape and one that is not floating point. model: the model
    the checkpoint fills (default: the one its configuration describes, on the meta device)."""
    if model is None:
        with torch.device("meta"):
            model = Pi05Model(info.config)
    expected = expected_keys(model, info.prefix)
    embedding, tied = info.prefix + EMBEDDING, info.prefix + TIED_HEAD
    source = {key: key for key in expected if key in info.shapes}
    if embedding not in info.shapes and tied in info.shapes:
        source[embedding] = tied                             # lerobot keeps the tied copy
    missing = sorted(set(expected) - set(source))
    unexpected = sorted(set(info.shapes) - set(expected) - {tied}
                        - {info.prefix + k for k in IGNORED})
    if missing or (unexpected and strict):
        raise CheckpointError(_key_report(info.path, missing, unexpected if strict else []))
    for key, stored_key in source.items():
        if info.shapes[stored_key] != expected[key]:
            raise CheckpointError(f"{info.path}: tensor {stored_key} has shape "
                                  f"{list(info.shapes[stored_key])}, the model needs "
                                  f"{list(expected[key])}")
        if info.stored_dtypes[stored_key] not in FLOAT_DTYPES:
            raise CheckpointError(f"{info.path}: tensor {stored_key} is stored as "
                                  f"{info.stored_dtypes[stored_key]}; parameters are floating "
                                  f"point ({', '.join(FLOAT_DTYPES)})")
    return source


def _key_report(path: Path, missing: list[str], unexpected: list[str], shown: int = 20) -> str:
    parts = [f"{path}: the checkpoint does not match the model"]
    for label, keys in (("missing", missing), ("unexpected", unexpected)):
        if keys:
            listed = "\n  ".join(keys[:shown])
            more = f"\n  ... and {len(keys) - shown} more" if len(keys) > shown else ""
            parts.append(f"{len(keys)} {label} keys:\n  {listed}{more}")
    return "\n".join(parts)
