"""dtype auto: bfloat16 exactly where the CPU has bf16 matrix units, and the reason said."""

import pytest

from oxygen_ros.model import precision
from oxygen_ros.model.loading import load_model
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
