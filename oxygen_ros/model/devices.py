"""Which device names this torch can run a model on."""

import torch


def device_problem(device: str) -> str:
    """Why this torch cannot run on `device` ('cpu', 'cuda', 'cuda:N'), or '' if it can."""
    try:
        kind = torch.device(device).type
    except RuntimeError:
        kind = ""
    if kind not in ("cpu", "cuda"):
        return "expected cpu, cuda or cuda:N"
    if kind == "cuda" and not torch.cuda.is_available():
        why = "a CPU-only build" if torch.version.cuda is None else "no GPU or driver found"
        return f"this torch cannot use CUDA ({why})"
    index = torch.device(device).index
    if kind == "cuda" and index is not None and index >= torch.cuda.device_count():
        return f"this machine has {torch.cuda.device_count()} CUDA device(s), cuda:0 up"
    return ""
