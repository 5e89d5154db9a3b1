"""The π0.5 prompt: task text and the robot state discretized into 256 bins; and how a
prompt over its token budget is cut: the end of its text goes, never the cue to answer."""

from typing import Callable

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


def pi05_prompt_tokens(tokenizer, instruction: str, state: np.ndarray, state_dim: int,
                       max_tokens: int) -> tuple[list[int], bool]:
    """The prompt's tokens, at most max_tokens, and whether the instruction was cut to fit:
    its end goes, the state and `Action: ` stay (openpi cuts the prompt's end, which loses
    them first)."""
    return fit_text(instruction, lambda task: tokenizer.encode(pi05_prompt(task, state,
                                                                           state_dim)),
                    max_tokens)


def fit_text(text: str, encode: Callable[[str], list[int]],
             max_tokens: int) -> tuple[list[int], bool]:
    """encode(text), or, if that is over max_tokens, encode() of the longest head of the text
    that fits (cut to max_tokens if even no text is over), and whether the text was cut."""
    tokens = encode(text)
    if len(tokens) <= max_tokens:
        return tokens, False
    fits, too_long = 0, len(text)
    while too_long - fits > 1:
        middle = (fits + too_long) // 2
        if len(encode(text[:middle])) <= max_tokens:
            fits = middle
        else:
            too_long = middle
    return encode(text[:fits])[:max_tokens], True
