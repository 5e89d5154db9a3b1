"""The benchmarks' workloads: plain dataclasses the CLI reads its defaults from without
loading the model."""

from dataclasses import dataclass

from oxygen_ros.engine.config import EngineConfig


@dataclass
class Workload:
    preset: str = "small"
    frames: int = 40
    warmup_frames: int = 2         # run first, not measured
    denoise_steps: int = 10
    cameras: int = 3
    decode_tokens: int = 24        # max new tokens per dialogue request
    tokens_per_frame: int = 4      # k
    dialogue_per_frame: float = 1.0  # expected new dialogue requests per frame (Poisson)
    memory_period_frames: int = 10   # a memory summary every this many frames (0: off)
    memory_tokens: int = 24
    frame_period_s: float = 0.1    # sensor time between frames (stamps, memory period)
    camera_every: int = 1          # a new camera image every this many frames
    num_pages: int = 2048
    page_size: int = 16
    prefix_attention: str = "bidirectional"
    seed: int = 0
    device: str = "cpu"
    dtype: str = "auto"           # model/precision.py: bfloat16 where bf16 matrix units are


@dataclass
class SwitchWorkload:
    delays: tuple = (0.1, 0.3, 0.5)
    chunks: int = 30
    period_steps: int = 10                # steps between chunks (the main job's 0.2 s frames
                                          # at 50 Hz; at most H - d); 0: H/2
    blend_s: float = 0.1
    dt: float = 0.02
    default_guidance: str = "error"
    execution_horizon: int = EngineConfig.rtc_execution_horizon   # the engine's defaults
    schedule: str = EngineConfig.rtc_prefix_attention_schedule
    max_guidance_weight: float = EngineConfig.rtc_max_guidance_weight
    seed: int = 0
    world_seed: int = 1000
    guidance: tuple = ("vjp", "error")     # the RTC variants to run
