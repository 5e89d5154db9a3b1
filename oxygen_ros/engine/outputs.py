"""What the engine emits: action chunks, streamed text, memory summaries, frame reports."""

from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class ActionChunk:
    frame_id: int
    stamp: float                 # the observation's stamp
    actions: np.ndarray          # [H, action_dim] float32
    latency_s: float             # frame start -> chunk ready
    late: bool                   # too late to take over before the plan in force ran out
    rtc: bool = False            # denoised by Real-Time Chunking to continue the plan
    inference_delay: int = 0     # RTC: steps frozen to the plan in force
    robot: str = ""              # whose plan it is ("": the only robot)


@dataclass(frozen=True)
class TextChunk:
    request_id: int
    kind: str                    # "dialogue" or "memory"
    seq: int                     # 0, 1, 2, ... per request
    text: str
    final: bool
    finish_reason: str = ""      # on the final chunk (docs/messages.md; shutdown is the
                                 # node's own)
    frame_id: Optional[int] = None   # the frame whose observation the text is about (None:
                                     # the request ended before it read one)
    robot: str = ""                  # the robot the request is for


@dataclass(frozen=True)
class MemorySummary:
    window_start: float
    window_end: float
    text: str
    frames: int
    robot: str = ""


@dataclass
class FrameReport:
    frame_id: int
    latency_s: float             # whole frame: prefill, actions and this frame's language work
    chunk: ActionChunk
    tokens: int                  # language tokens decoded in this frame
    preempted: int
    active_requests: int
    pages_in_use: int
    next_frame_at: float         # when this robot's next frame should start (engine clock)
    robot: str = ""
