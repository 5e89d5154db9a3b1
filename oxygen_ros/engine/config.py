"""EngineConfig: everything the engine is told besides the model — cache size, the
real-time contract (frame target, plan deadline, language floor), request limits,
decoding. Each field's default and description live here only (the inference node
declares its parameters from them)."""

import string
from dataclasses import dataclass
from typing import Optional

from oxygen_ros.engine.parameters import check_all, parameter
from oxygen_ros.engine.rtc_settings import GUIDANCE, SCHEDULES, SWITCHES, RTCSettings


@dataclass
class EngineConfig:
    camera_names: tuple[str, ...] = parameter(
        ("base", "left_wrist", "right_wrist"), "model camera slots, in order")
    page_size: int = parameter(16, "tokens per KV page", range=(1, 4096))
    num_pages: int = parameter(512, "KV pages in the unified pool (all tasks); at least every "
                               "robot's newest prefix and one request whole",
                               range=(1, 10_000_000))
    tokens_per_frame: int = parameter(4, "k: decode steps per frame for all language requests",
                                      range=(1, 100_000))
    max_tokens_per_frame: int = parameter(8, "cap when language catches up after throttling",
                                          range=(1, 100_000))
    dialogue_max_tokens: int = parameter(
        48, "max new tokens per dialogue answer whose request does not give its own (an Ask "
        "goal's max_tokens; an answer the KV pool cannot hold ends kv_full)",
        range=(1, 100_000))
    memory_max_tokens: int = parameter(48, "max new tokens per memory summary",
                                       range=(1, 100_000))
    memory_period_s: float = parameter(10.0, "episodic memory period (0.1 Hz); 0 turns it off",
                                       range=(0.0, 1e6))
    max_request_tokens: int = parameter(256, "max tokens of a dialogue prompt (template and "
                                        "text); a longer one loses the end of its text, "
                                        "not the cue to answer (counted)",
                                        range=(1, 1_000_000))
    # -- the real-time contract
    frame_period_s: Optional[float] = parameter(
        None, "target time between engine frames (fresh chunks); a frame comes earlier when "
              "the plan in force needs its successor. None: no clock at all (benchmarks)",
        kind=float, range=(1e-3, 3600.0))
    action_dt_s: float = parameter(0.02, "seconds between the steps of a chunk",
                                   range=(1e-4, 10.0))
    chunk_switch: str = parameter(
        "rtc", "how a new chunk takes over: rtc (Real-Time Chunking: denoised to continue "
               "the plan in force, no fade), crossfade (over blend_s) or none",
        choices=SWITCHES)
    blend_s: float = parameter(0.1, "how long a new chunk takes over in: crossfade fades "
                                    "from the old chunk this long, rtc guides at least this "
                                    "long after the frozen steps; a successor is due this "
                                    "long before the plan in force runs out (rtc: at most "
                                    "half of what the plan leaves after deadline_margin_s; "
                                    "none: 0)",
                               range=(0.0, 60.0))
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
        0.02, "a successor chunk is due this long before the plan in force runs out (with "
              "chunk_switch rtc or crossfade: on top of blend_s)", range=(0.0, 60.0))
    language_floor: float = parameter(0.1, "share of frame_period_s language always gets "
                                           "after a chunk", range=(0.0, 1.0))
    # -- requests
    request_timeout_s: float = parameter(60.0, "a dialogue request not finished by then ends "
                                               "with finish_reason timeout (0: never)",
                                         range=(0.0, 1e6))
    max_pending_requests: int = parameter(
        64, "dialogue requests of one robot beyond this many waiting or running end at once "
            "with finish_reason queue_full", range=(1, 1_000_000))
    admission: bool = parameter(
        True, "with several robots: serve as many as the start-up measurement says keep their "
              "targets and refuse the rest with the numbers; at run time shed the last robots "
              "when the served robots' plans can no longer be kept fed, and serve a refused one "
              "again when the measured paths leave room (false: serve every robot, each one's "
              "diagnostics WARN while its targets cannot be met)")
    # -- speed
    cuda_graphs: bool = parameter(True, "on CUDA: decode steps and the denoising loop "
                                        "(also the RTC-guided loop) as CUDA graphs")
    torch_compile: bool = parameter(
        False, "torch.compile: on a CPU the vision tower, prefill, denoising step and decode "
               "step, compiled while the engine calibrates at start-up (minutes) and fixed "
               "then: a call of a shape not compiled runs eager, counted in /diagnostics "
               "(compiled_calls_run_eager); on CUDA the MLP blocks (slower start-up)")
    temperature: float = parameter(0.0, "sampling temperature; 0 is greedy",
                                   range=(0.0, 1000.0))
    top_p: float = parameter(1.0, "nucleus sampling mass (above 0)", range=(0.0, 1.0))
    stop_at_eos: bool = parameter(True, "end an answer at the end-of-sequence token")
    seed: int = parameter(0, "noise seed (the node also seeds a preset's random weights "
                             "with it)", range=(0, 2**31 - 1))
    dialogue_template: str = parameter("\nUser: {text}\nRobot: ",
                                       "prompt around a dialogue request ({text})")
    memory_template: str = parameter(
        "\nMemory so far: {previous}\nSummary of frames {first}-{last}: ",
        "prompt of a memory summary ({previous}, {first}, {last})")

    def __post_init__(self):
        check_all(self)
        if self.max_tokens_per_frame < self.tokens_per_frame:
            raise ValueError("need tokens_per_frame <= max_tokens_per_frame")
        if not self.camera_names or len(set(self.camera_names)) != len(self.camera_names):
            raise ValueError(f"camera_names must be distinct names, at least one, not "
                             f"{list(self.camera_names)}")
        if self.top_p <= 0:
            raise ValueError("top_p must be above 0 (1: no nucleus cut)")
        RTCSettings(self.rtc_execution_horizon, self.rtc_prefix_attention_schedule,
                    self.rtc_max_guidance_weight, self.rtc_guidance)   # raises if wrong
        check_template("dialogue_template", self.dialogue_template, dict(text="what now?"))
        check_template("memory_template", self.memory_template,
                       dict(previous="", first=0, last=1))


def check_template(name: str, template: str, fields: dict) -> None:
    """A prompt template the engine can fill with `fields` whenever a request comes: every
    field it names is one of them, a dialogue template holds the question ({text}) and a
    filled one is not blank."""
    known = ", ".join(f"{{{field}}}" for field in fields)
    try:
        named = {field for _, field, _, _ in string.Formatter().parse(template)
                 if field is not None}
        unknown = sorted(field for field in named
                         if field.split(".")[0].split("[")[0] not in fields)
        if unknown:
            raise ValueError(f"{{{unknown[0]}}} is none of its fields")
        filled = template.format(**fields)
    except (ValueError, KeyError, IndexError, AttributeError, TypeError) as error:
        raise ValueError(f"{name} {template!r}: {error} (its fields: {known}; a literal brace "
                         "is written twice)") from None
    if "text" in fields and "text" not in named:
        raise ValueError(f"{name} {template!r} has no {{text}}: the question would never "
                         "reach the model")
    if not filled.strip():
        raise ValueError(f"{name} {template!r} is blank once filled: the model would get no "
                         "prompt")
