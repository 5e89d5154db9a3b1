"""The compute dtype: a name, or `auto` resolved from the hardware's bf16 matrix units."""

from pathlib import Path
from typing import Optional

DTYPE_NAMES = ("auto", "float32", "bfloat16")
# CPU flags (Linux /proc/cpuinfo) of instructions that multiply bf16 matrices natively
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The first CPU's flags, or none where /proc/cpuinfo cannot be read (not Linux)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def resolve_dtype(name: str, device: str = "cpu",
                  flags: Optional[set[str]] = None) -> tuple[str, str]:
    """(float32 or bfloat16, why). auto: bfloat16 where the device has bf16 matrix units
    (AMX or AVX512-BF16 on CPU, tensor cores of compute capability 8.0 or later on CUDA),
    else float32. flags: the CPU's (default: read from /proc/cpuinfo)."""
    if name not in DTYPE_NAMES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPE_NAMES)}, not {name!r}")
    if name != "auto":
        return name, "as set"
    if device.startswith("cuda"):
        import torch

        major, minor = torch.cuda.get_device_capability(device)
        if major >= 8:
            return "bfloat16", f"auto: CUDA compute capability {major}.{minor} has bf16 " \
                               "tensor cores"
        return "float32", f"auto: CUDA compute capability {major}.{minor} has no bf16 " \
                          "tensor cores"
    found = [flag for flag in BF16_CPU_FLAGS if flag in (cpu_flags() if flags is None else flags)]
    if found:
        return "bfloat16", f"auto: the CPU has {' and '.join(found)}"
    return "float32", f"auto: the CPU has no bf16 matrix units (none of " \
                      f"{', '.join(BF16_CPU_FLAGS)})"
