"""EngineConfig: everything the engine is told besides the model — cache size, the
real-time contract (frame target, plan deadline, language floor), request limits,
decoding. Each field's default and description live here only (the inference node
declares its parameters from them)."""

from dataclasses import dataclass
from typing import Optional

from oxygen_ros.engine.parameters import parameter
from oxygen_ros.engine.rtc_settings import GUIDANCE, SCHEDULES, SWITCHES, RTCSettings


@dataclass
class EngineConfig:
    camera_names: tuple[str, ...] = parameter(
        ("base", "left_wrist", "right_wrist"), "model camera slots, in order")
    page_size: int = parameter(16, "tokens per KV page")
    num_pages: int = parameter(512, "KV pages in the unified pool (all tasks)",
                               range=(1, 10_000_000))
    tokens_per_frame: int = parameter(4, "k: decode steps per frame for all language requests")
    max_tokens_per_frame: int = parameter(8, "cap when language catches up after throttling")
    dialogue_max_tokens: int = parameter(48, "max new tokens per dialogue answer")
    memory_max_tokens: int = parameter(48, "max new tokens per memory summary")
    memory_period_s: float = parameter(10.0, "episodic memory period (0.1 Hz); <= 0 turns "
                                             "it off")
    max_request_tokens: int = parameter(256, "longer dialogue text is cut (and counted)")
    # -- the real-time contract
    frame_period_s: Optional[float] = parameter(
        None, "target time between engine frames (fresh chunks); a frame comes earlier when "
              "the plan in force needs its successor. None: no clock at all (benchmarks)",
        kind=float)
    action_dt_s: float = parameter(0.02, "seconds between the steps of a chunk")
    chunk_switch: str = parameter(
        "rtc", "how a new chunk takes over: rtc (Real-Time Chunking: denoised to continue "
               "the plan in force, no fade), crossfade (over blend_s) or none",
        choices=SWITCHES)
    blend_s: float = parameter(0.1, "chunk_switch crossfade: fade from the old to the new "
                                    "chunk this long")
    rtc_guidance: str = parameter(
        "error", "rtc: error (lerobot 0.6.1's, no backward pass) or vjp (the paper's, a "
                 "backward pass through the action expert)", choices=GUIDANCE)
    rtc_execution_horizon: int = parameter(
        0, "rtc: chunk steps guided toward the plan in force, at least the frozen ones (0: "
           "all the plan still covers)", range=(0, 100_000))
    rtc_prefix_attention_schedule: str = parameter(
        "exp", "rtc: weights after the frozen steps", choices=SCHEDULES)
    rtc_max_guidance_weight: float = parameter(
        3.0, "rtc: clip of the guidance weight (0: no guidance); higher: smoother switches "
             "but chunks that lag the task more (docs/rtc.md)",
        range=(0.0, 1e6))
    deadline_margin_s: float = parameter(
        0.02, "a successor chunk is due this long before the plan in force runs out (on top "
              "of blend_s)")
    language_floor: float = parameter(0.1, "share of frame_period_s language always gets "
                                           "after a chunk", range=(0.0, 1.0))
    # -- requests
    request_timeout_s: float = parameter(60.0, "a dialogue request not finished by then ends "
                                               "with finish_reason timeout (0: never)")
    max_pending_requests: int = parameter(
        64, "dialogue requests beyond this many waiting or running end at once with "
            "finish_reason queue_full", range=(1, 1_000_000))
    # -- speed on CUDA (the CPU path never changes)
    cuda_graphs: bool = parameter(True, "on CUDA: decode steps and the denoising loop as "
                                        "CUDA graphs")
    torch_compile: bool = parameter(False, "on CUDA: torch.compile the MLP blocks (slower "
                                           "start-up)")
    temperature: float = parameter(0.0, "sampling temperature; 0 is greedy")
    top_p: float = parameter(1.0, "nucleus sampling mass")
    stop_at_eos: bool = parameter(True, "end an answer at the end-of-sequence token")
    seed: int = parameter(0, "noise seed (the node also seeds a preset's random weights "
                             "with it)")
    dialogue_template: str = parameter("\nUser: {text}\nRobot: ",
                                       "prompt around a dialogue request ({text})")
    memory_template: str = parameter(
        "\nMemory so far: {previous}\nSummary of frames {first}-{last}: ",
        "prompt of a memory summary ({previous}, {first}, {last})")

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
