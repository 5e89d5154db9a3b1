"""The π0.5 prompt: task text and the robot state discretized into 256 bins; and how a
prompt over its token budget is cut: the end of its text goes, never the cue to answer."""

from typing import Callable, Optional

import numpy as np


def discretize_state(state: np.ndarray, dim: Optional[int]) -> np.ndarray:
    """Normalized state in [-1, 1] as bin indices (openpi's and lerobot's np.digitize: -1
    below the range, 255 at its top and above), padded with zeros or truncated to `dim`
    values (None: as many as the state has)."""
    values = np.nan_to_num(np.asarray(state, dtype=np.float64).reshape(-1),
                           nan=0.0, posinf=1.0, neginf=-1.0)
    if dim is not None:
        values = np.concatenate([values[:dim], np.zeros(max(0, dim - len(values)))])
    bins = np.linspace(-1.0, 1.0, 257)[:-1]
    return np.digitize(values, bins) - 1


def clean_task(instruction: str) -> str:
    """openpi's cleaning of the task text."""
    return instruction.strip().replace("_", " ").replace("\n", " ")


def pi05_prompt(instruction: str, state: np.ndarray, state_dim: int,
                state_prompt: str = "padded") -> str:
    """`Task: {instruction}, State: {bins};\\nAction: ` (openpi's cleaned task text), the
    state as `state_prompt` says (config.STATE_PROMPTS); with "none", the task and a newline."""
    if state_prompt == "none":
        return clean_task(instruction) + "\n"
    dim = state_dim if state_prompt == "padded" else None
    bins = " ".join(str(int(b)) for b in discretize_state(state, dim))
    return f"Task: {clean_task(instruction)}, State: {bins};\nAction: "


def pi05_prompt_tokens(tokenizer, instruction: str, state: np.ndarray, state_dim: int,
                       max_tokens: int, state_prompt: str = "padded") -> tuple[list[int], bool]:
    """The prompt's tokens, at most max_tokens, and whether the instruction was cut to fit:
    its end goes, the state and `Action: ` stay (openpi cuts the prompt's end, which loses
    them first). With state_prompt "none" the newline is encoded on its own, as openpi
    does."""
    if state_prompt == "none":
        newline = tokenizer.encode("\n", bos=False)
        return fit_text(instruction, lambda task: tokenizer.encode(clean_task(task)) + newline,
                        max_tokens)
    return fit_text(instruction, lambda task: tokenizer.encode(
        pi05_prompt(task, state, state_dim, state_prompt)), max_tokens)


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
