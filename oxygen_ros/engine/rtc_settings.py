"""Real-Time Chunking's settings and the names the engine accepts for them: no torch, so
the configuration (and the command line reading its defaults) loads without the model."""

from dataclasses import dataclass

SCHEDULES = ("zeros", "ones", "linear", "exp")
GUIDANCE = ("vjp", "error")
SWITCHES = ("rtc", "crossfade", "none")


@dataclass(frozen=True)
class RTCSettings:
    """The defaults are lerobot 0.6.1's RTCConfig's (the engine's differ: exp, weight 3); the
    engine builds its own from EngineConfig's rtc_* parameters and blend_s."""
    execution_horizon: int = 10           # steps of the new chunk guided toward the old plan
    prefix_attention_schedule: str = "linear"
    max_guidance_weight: float = 10.0     # 0 turns guidance off (the plain sampler)
    guidance: str = "error"
    least_overlap: int = 0                # steps guided after the frozen ones, the plan in
    #                                       force's last step held where it has run out

    def __post_init__(self):
        schedule = self.prefix_attention_schedule.lower()
        object.__setattr__(self, "prefix_attention_schedule", schedule)
        if schedule not in SCHEDULES:
            raise ValueError(f"rtc_prefix_attention_schedule {self.prefix_attention_schedule!r}: "
                             f"one of {', '.join(SCHEDULES)}")
        if self.guidance not in GUIDANCE:
            raise ValueError(f"rtc_guidance {self.guidance!r}: one of {', '.join(GUIDANCE)}")
        if self.max_guidance_weight < 0:
            raise ValueError("rtc_max_guidance_weight must not be negative")
        if self.execution_horizon < 0:
            raise ValueError("rtc_execution_horizon must not be negative")
        if self.least_overlap < 0:
            raise ValueError("least_overlap must not be negative")
