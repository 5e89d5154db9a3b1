"""The π0.5 prompt: task text and the robot state discretized into 256 bins."""

import numpy as np


def discretize_state(state: np.ndarray, dim: int) -> np.ndarray:
    """Normalized state in [-1, 1], padded/truncated to `dim`, as bin indices 0..255."""
    padded = np.zeros(dim, dtype=np.float64)
    values = np.asarray(state, dtype=np.float64).reshape(-1)[:dim]
    padded[:len(values)] = np.nan_to_num(values, nan=0.0, posinf=1.0, neginf=-1.0)
    bins = np.linspace(-1.0, 1.0, 257)[:-1]
    return np.clip(np.digitize(padded, bins) - 1, 0, 255)


def pi05_prompt(instruction: str, state: np.ndarray, state_dim: int) -> str:
    """`Task: {instruction}, State: {bins};\\nAction: ` (openpi's cleaned task text)."""
    task = instruction.strip().replace("_", " ").replace("\n", " ")
    bins = " ".join(str(int(b)) for b in discretize_state(state, state_dim))
    return f"Task: {task}, State: {bins};\nAction: "
