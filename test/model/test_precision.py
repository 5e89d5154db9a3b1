"""dtype auto: bfloat16 exactly where the CPU has bf16 matrix units, and the reason said."""

import pytest
import torch

from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.model import precision
from oxygen_ros.model.config import preset
from oxygen_ros.model.loading import load_model
from oxygen_ros.model.pi05 import FLOAT32_HEADS, Pi05Model
from oxygen_ros.model.precision import resolve_dtype


@pytest.mark.parametrize("flags, expected", [
    ({"avx2", "avx512f", "avx512_bf16"}, "bfloat16"),       # AMD Zen 4, Intel Cooper Lake
    ({"avx512f", "amx_tile", "amx_bf16", "avx512_bf16"}, "bfloat16"),   # Sapphire Rapids
    ({"avx2", "fma"}, "float32"),                            # AVX2 only
    ({"avx512f", "avx512_vnni"}, "float32"),                 # AVX-512 without bf16
    (set(), "float32"),                                      # flags unreadable
])
def test_auto_is_bfloat16_only_with_bf16_matrix_units(flags, expected):
    dtype, why = resolve_dtype("auto", "cpu", flags)
    assert dtype == expected
    assert why.startswith("auto: ")
    assert all(flag in why for flag in flags & set(precision.BF16_CPU_FLAGS))


def test_an_explicit_dtype_is_kept_whatever_the_hardware():
    assert resolve_dtype("float32", "cpu", {"amx_bf16"}) == ("float32", "as set")
    assert resolve_dtype("bfloat16", "cpu", set()) == ("bfloat16", "as set")
    with pytest.raises(ValueError, match="auto, float32, bfloat16"):
        resolve_dtype("float16")


def test_flags_are_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16\n\n"
                       "processor\t: 1\nflags\t\t: fpu avx512f avx512_bf16\n")
    assert precision.cpu_flags(cpuinfo) == {"fpu", "avx512f", "avx512_bf16"}
    assert precision.cpu_flags(tmp_path / "missing") == set()


@pytest.mark.parametrize("flags, dtype", [({"amx_bf16"}, "bfloat16"), ({"avx2"}, "float32")])
def test_the_loaded_model_runs_the_resolved_dtype_and_says_why(monkeypatch, flags, dtype):
    monkeypatch.setattr(precision, "cpu_flags", lambda: flags)
    loaded = load_model(preset="tiny", dtype="auto")
    assert str(loaded.model.dtype) == f"torch.{dtype}"
    assert f"{dtype} (auto: the CPU has" in loaded.description


def test_in_bfloat16_the_action_heads_and_the_euler_state_stay_float32(make_prefix):
    """As openpi and lerobot run π0.5 in bfloat16: the heads outside the VLM-with-expert
    and the Gemma norms are float32, and the flow-matching state is never rounded to
    bfloat16 between steps."""
    model = Pi05Model(preset("tiny"), dtype=torch.bfloat16).eval()
    kept = {name for name, p in model.named_parameters() if p.dtype == torch.float32}
    norms = {name for name, _ in model.named_parameters()
             if ("layernorm." in name and not name.startswith("vision."))
             or name.startswith(("language_model.norm.", "expert.norm."))}
    heads = {f"{head}.{p}" for head in FLOAT32_HEADS for p in ("weight", "bias")}
    assert kept == heads | norms and any(".dense." in name for name in norms)
    config = model.config
    cache = KVCache.for_model(config, num_pages=16, page_size=16, dtype=model.dtype)
    table = model.prefill(make_prefix(config), cache)
    noise = torch.randn(1, config.action_horizon, config.action_dim,
                        generator=torch.Generator().manual_seed(0))
    actions = model.sample_actions([table], noise, cache)
    inputs, x, dt = model.action_inputs([table], cache), noise, -1.0 / config.num_denoise_steps
    for step in range(config.num_denoise_steps):
        velocity = model.velocity(inputs, x, torch.full((1,), 1.0 + step * dt), cache)
        assert velocity.dtype == torch.float32
        x = x + dt * velocity
    assert actions.dtype == torch.float32 and torch.equal(actions, x)
