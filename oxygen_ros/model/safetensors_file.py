"""safetensors files without a second copy: tensors mapped from the file, and a writer that
streams one tensor at a time. The format is an 8-byte header length, a JSON header
(name -> dtype, shape, byte range) and the raw bytes; nothing in it is ever executed."""

import json
import mmap
import struct
from pathlib import Path
from typing import Callable, Collection, Optional

import torch

DTYPES = {"F64": torch.float64, "F32": torch.float32, "BF16": torch.bfloat16,
          "F16": torch.float16, "I64": torch.int64, "I32": torch.int32, "I16": torch.int16,
          "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
NAMES = {dtype: name for name, dtype in DTYPES.items()}


def mapped_tensors(path: Path, names: Optional[Collection[str]] = None) -> dict[str, torch.Tensor]:
    """The tensors of the file named in `names` (default: every one) as views of one private
    memory map: pages are read on first touch and shared with the page cache; a write copies
    only the page written."""
    with open(path, "rb") as file:
        length, = struct.unpack("<Q", file.read(8))
        header = json.loads(file.read(length))
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
    start = 8 + length
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__" or names is not None and name not in names:
            continue
        dtype = DTYPES[entry["dtype"]]
        first, last = entry["data_offsets"]
        count = (last - first) // dtype.itemsize
        flat = torch.frombuffer(mapped, dtype=dtype, count=count, offset=start + first) \
            if count else torch.empty(0, dtype=dtype)
        tensors[name] = flat.view(entry["shape"])
    return tensors


def write(path: Path, shapes: dict[str, tuple[tuple[int, ...], torch.dtype]],
          tensor: Callable[[str], torch.Tensor]) -> None:
    """Write a safetensors file with these names, shapes and dtypes; tensor(name) makes each
    one when its turn comes, so memory holds one tensor at a time."""
    header, offset = {}, 0
    for name, (shape, dtype) in shapes.items():
        size = dtype.itemsize
        for dim in shape:
            size *= dim
        header[name] = {"dtype": NAMES[dtype], "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)        # the data starts 8-byte aligned
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(encoded)) + encoded)
        for name, (shape, dtype) in shapes.items():
            value = tensor(name).to(dtype).contiguous()
            if tuple(value.shape) != tuple(shape):
                raise ValueError(f"{name}: made {list(value.shape)}, header says {list(shape)}")
            file.write(_raw(value))


def _raw(value: torch.Tensor) -> memoryview:
    flat = value.reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else memoryview(b"")
