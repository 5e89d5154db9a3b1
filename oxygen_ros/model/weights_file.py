"""A checkpoint's weights file, found and opened: safetensors only. Pickle files (by their
suffix, or by their first bytes under a safetensors name) are refused, never read."""

from pathlib import Path

from safetensors import SafetensorError, safe_open

WEIGHTS = "model.safetensors"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message names the file, key or shape."""


def weights_file(path: Path) -> Path:
    """The safetensors file of a checkpoint (a directory's model.safetensors, or the file
    given); a pickle file is refused by its suffix."""
    path = Path(path)
    if path.is_file():
        if path.suffix.lower() in PICKLE_SUFFIXES:
            raise CheckpointError(f"{path}: pickle checkpoints are never loaded (they can run "
                                  "code); convert it to safetensors")
        return path
    if not path.is_dir():
        raise CheckpointError(f"{path}: not a regular file or directory" if path.exists()
                              else f"{path}: no such checkpoint file or directory")
    weights = path / WEIGHTS
    if not weights.exists():
        pickles = sorted(p.name for p in path.iterdir() if p.suffix.lower() in PICKLE_SUFFIXES)
        hint = (f"; found pickle files {pickles}, which are never loaded (they can run code) "
                "— convert them to safetensors") if pickles else ""
        if (path / f"{WEIGHTS}.index.json").exists():
            hint += (f"; {WEIGHTS}.index.json says the weights are sharded, which this loader "
                     f"does not read: merge the shards into one {WEIGHTS}")
        raise CheckpointError(f"{path}: no {WEIGHTS}{hint}")
    return weights


def open_weights(weights: Path):
    """safetensors' reader of the file; one that is not safetensors is refused, a pickle
    named as one by its first bytes."""
    try:
        return safe_open(str(weights), framework="pt", device="cpu")
    except (SafetensorError, OSError, ValueError) as error:
        if _looks_pickled(weights):
            raise CheckpointError(f"{weights}: a pickle (torch.save) file under a safetensors "
                                  "name; pickle checkpoints are never loaded (they can run "
                                  "code): convert it to safetensors") from None
        raise CheckpointError(f"{weights}: not a readable safetensors file ({error}); a "
                              "truncated download or a file of another format") from None


def _looks_pickled(path: Path) -> bool:
    """A pickle stream (0x80, protocol 2 to 5, an opcode; a safetensors header's length
    would have 0 as third byte) or torch.save's zip archive."""
    try:
        with open(path, "rb") as handle:
            start = handle.read(4)
    except OSError:
        return False
    return (len(start) == 4 and start[0] == 0x80 and 2 <= start[1] <= 5 and start[2] != 0
            or start == b"PK\x03\x04")
