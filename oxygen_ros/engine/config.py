"""EngineConfig: everything the engine is told besides the model — cache size, cadences,
budgets, decoding."""

from dataclasses import dataclass
from typing import Optional


@dataclass
class EngineConfig:
    camera_names: tuple[str, ...] = ("base", "left_wrist", "right_wrist")
    page_size: int = 16
    num_pages: int = 512                   # the whole unified pool (all tasks)
    tokens_per_frame: int = 4              # k: decode steps per control frame (all requests)
    max_tokens_per_frame: int = 8          # cap when language catches up after throttling
    dialogue_max_tokens: int = 32
    memory_max_tokens: int = 48
    memory_period_s: float = 10.0          # 0.1 Hz episodic memory; <= 0 turns it off
    max_request_tokens: int = 256          # longer dialogue text is cut (and counted)
    control_period_s: Optional[float] = None   # frame budget; None: no deadline (benchmarks)
    action_deadline_s: Optional[float] = None  # chunk must be out this soon after frame start
    language_margin_s: float = 0.002       # kept free at the end of each frame
    temperature: float = 0.0               # 0: greedy
    top_p: float = 1.0
    stop_at_eos: bool = True
    seed: int = 0
    dialogue_template: str = "\nUser: {text}\nRobot: "
    memory_template: str = "\nMemory so far: {previous}\nSummary of frames {first}-{last}: "

    def __post_init__(self):
        if self.tokens_per_frame < 0 or self.max_tokens_per_frame < self.tokens_per_frame:
            raise ValueError("need 0 <= tokens_per_frame <= max_tokens_per_frame")
        if self.num_pages < 1 or self.page_size < 1:
            raise ValueError("num_pages and page_size must be positive")
        if self.control_period_s is not None and self.control_period_s <= 0:
            raise ValueError("control_period_s must be positive")
