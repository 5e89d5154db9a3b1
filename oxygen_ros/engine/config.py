"""EngineConfig: everything the engine is told besides the model — cache size, the
real-time contract (frame target, plan deadline, language floor), request limits,
decoding."""

from dataclasses import dataclass
from typing import Optional

from oxygen_ros.engine.rtc import SWITCHES, RTCSettings


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
    # -- the real-time contract (frame_period_s None: no clock at all, as in benchmarks)
    frame_period_s: Optional[float] = None   # target: a new frame (fresh chunk) this often
    action_dt_s: float = 0.02              # seconds between the steps of a chunk
    # -- how a new chunk takes over from the plan in force: rtc (Real-Time Chunking: the
    # new chunk is denoised to continue the plan, no fade), crossfade (over blend_s), none
    chunk_switch: str = "rtc"
    blend_s: float = 0.1                   # crossfade: a new chunk takes over over this long
    rtc_guidance: str = "error"            # error (lerobot 0.6.1's) or vjp (the paper's)
    rtc_execution_horizon: int = 0         # steps guided toward the plan, at least the
                                           # frozen ones; 0: all the plan still covers
    rtc_prefix_attention_schedule: str = "exp"      # zeros, ones, linear, exp
    # clip of the guidance weight (0: no guidance); higher: smoother switches but chunks
    # that lag the task more (README "Chunk switching")
    rtc_max_guidance_weight: float = 3.0
    deadline_margin_s: float = 0.02        # the successor chunk is due this much earlier
    language_floor: float = 0.1            # share of frame_period_s language always gets
    # -- requests
    request_timeout_s: float = 60.0        # a request not finished by then ends ("timeout")
    max_pending_requests: int = 64         # dialogue requests beyond this end ("queue_full")
    # -- speed on CUDA (the CPU path never changes)
    cuda_graphs: bool = True               # decode steps and the denoising loop as graphs
    torch_compile: bool = False            # torch.compile the MLP blocks
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
        if self.frame_period_s is not None and self.frame_period_s <= 0:
            raise ValueError("frame_period_s must be positive")
        if self.action_dt_s <= 0:
            raise ValueError("action_dt_s must be positive")
        if self.chunk_switch not in SWITCHES:
            raise ValueError(f"chunk_switch {self.chunk_switch!r}: one of {', '.join(SWITCHES)}")
        RTCSettings(self.rtc_execution_horizon, self.rtc_prefix_attention_schedule,
                    self.rtc_max_guidance_weight, self.rtc_guidance)   # raises if wrong
        if self.blend_s < 0 or self.deadline_margin_s < 0:
            raise ValueError("blend_s and deadline_margin_s must not be negative")
        if not 0.0 <= self.language_floor <= 1.0:
            raise ValueError("language_floor is a share of the frame: 0 to 1")
        if self.max_pending_requests < 1:
            raise ValueError("max_pending_requests must be at least 1")
        if self.request_timeout_s < 0:
            raise ValueError("request_timeout_s must not be negative (0: no timeout)")
