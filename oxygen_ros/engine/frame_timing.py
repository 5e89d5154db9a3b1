"""FrameTiming: when the next control frame must start so the plan in force never runs out,
which chunks came too late, and what this machine can deliver.

A chunk computed from an observation stamped s covers s .. s + H·dt. Its successor must
arrive, and finish blending in, before that plan runs out:

    due      = s + H·dt - blend_s              (a later arrival is a deadline miss;
                                               blend_s: takeover_s(), the cross-fade or
                                               RTC's overlap; 0 with none)
    start_by = due - deadline_margin_s - p95(action path)
    next frame starts at min(frame start + frame_period_s, start_by)

so frames come at the target period, earlier when the plan needs a successor sooner
(just in time, never later). Language runs between the chunk and the next frame's start;
it keeps a floor (language_floor × frame_period_s) unless the floor would make the next
chunk late while it could still be on time.

A sequential engine keeps the plan fed only while
    action path + language <= H·dt - blend - margin - action path - observation age
(language: what it used after a chunk, at most its floor);
beyond that frames run back to back and the robot holds the last step of the plan in
force for part of every frame. capacity() predicts that fraction from the same numbers.
"""

import math
from collections import deque
from dataclasses import dataclass
from typing import Optional

from oxygen_ros.engine.config import EngineConfig


def percentile(values, q: float) -> float:
    """Nearest-rank percentile of a non-empty sequence (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Capacity:
    """What the engine can deliver at steady state, from measured latencies."""
    target_period_s: float
    frame_period_s: float          # predicted time between frames
    action_path_s: float           # p50: prefill + denoising
    action_path_p95_s: float
    observation_age_s: float       # how old an observation is when its frame starts
    chunk_age_s: float             # how old a chunk's observation is when the chunk takes over
    language_share: float          # of the engine's time
    plan_fed: bool                 # every chunk takes over before the plan in force runs out
    floor_met: bool                # language gets its whole floor every frame
    predicted_held_fraction: float  # of commands that repeat the last step of a plan

    @property
    def meets_targets(self) -> bool:
        return (self.plan_fed and self.floor_met
                and self.frame_period_s <= self.target_period_s * 1.05)

    def describe(self) -> str:
        line = (f"action path {self.action_path_s * 1e3:.0f} ms (p95 "
                f"{self.action_path_p95_s * 1e3:.0f} ms); frames every "
                f"{self.frame_period_s:.3f} s (target {self.target_period_s:.3f} s, "
                f"{1 / self.frame_period_s:.1f} chunks/s); a chunk takes over "
                f"{self.chunk_age_s * 1e3:.0f} ms after its observation; language gets "
                f"{self.language_share:.0%} of the engine")
        if not self.plan_fed:
            line += (f"; the plan cannot be kept fed (the action path is more than half of "
                     f"the usable horizon): predicted held commands "
                     f"{self.predicted_held_fraction:.0%}")
        elif not self.floor_met:
            line += "; language gets less than its floor so that the plan stays fed"
        return line


def takeover_s(config: EngineConfig, horizon_s: float) -> float:
    """How long before the plan in force runs out its successor must be in: the cross-fade's
    blend_s; RTC's overlap, blend_s but at most half of what the plan leaves after the
    margin (RTC continues a plan that ends sooner by its held last step, so its overlap
    never makes a plan too short to run); none: 0."""
    if config.chunk_switch == "crossfade":
        return config.blend_s
    if config.chunk_switch == "rtc":
        return min(config.blend_s, max(0.0, horizon_s - config.deadline_margin_s) / 2)
    return 0.0


class FrameTiming:
    def __init__(self, config: EngineConfig, action_horizon: int, window: int = 32):
        self.period = config.frame_period_s
        self.horizon_s = action_horizon * config.action_dt_s
        self.blend_s = takeover_s(config, self.horizon_s)
        if self.period is not None and self.horizon_s <= self.blend_s + config.deadline_margin_s:
            after = (f"blend_s {self.blend_s:g} s + " if self.blend_s else "") + \
                f"deadline_margin_s {config.deadline_margin_s:g} s"
            shorten = ("blend_s or " if self.blend_s else "") + "deadline_margin_s"
            raise ValueError(
                f"a plan of {action_horizon} steps x action_dt_s {config.action_dt_s:g} s = "
                f"{self.horizon_s:g} s leaves no time for a successor after {after}: "
                f"lengthen action_dt_s or shorten {shorten}")
        self.margin_s = config.deadline_margin_s
        self.floor_s = config.language_floor * (self.period or 0.0)
        self.action_path: deque = deque(maxlen=window)   # warm samples, seconds
        self.path_robots: deque = deque(maxlen=window)   # robots in each sample's frame
        self.ages: deque = deque(maxlen=window)
        self.language: deque = deque(maxlen=window)      # language seconds after a chunk
        self.plan_stamp: Optional[float] = None          # stamp of the plan in force
        self.observed = 0                                # action paths ever observed

    # -- measurements --------------------------------------------------------------------
    def observe_action_path(self, seconds: float, robots: int = 1) -> None:
        """An action path of `seconds`, in a frame that served `robots` robots."""
        self.action_path.append(seconds)
        self.path_robots.append(robots)
        self.observed += 1

    def forget_action_paths(self) -> None:
        """Drop every action path observed (they say nothing of what comes)."""
        self.action_path.clear()
        self.path_robots.clear()

    def observe_age(self, seconds: float) -> None:
        self.ages.append(max(0.0, seconds))

    def observe_language(self, seconds: float) -> None:
        self.language.append(seconds)

    def action_path_p95(self) -> float:
        return percentile(self.action_path, 95) if self.action_path else 0.0

    def action_path_max(self) -> float:
        return max(self.action_path) if self.action_path else 0.0

    # -- the plan in force -----------------------------------------------------------------
    def due(self) -> float:
        """Latest arrival of the successor chunk that still takes over in time."""
        if self.plan_stamp is None:
            return math.inf
        return self.plan_stamp + self.horizon_s - self.blend_s

    def start_by(self) -> float:
        """Latest start of the next frame that still makes `due`."""
        return self.due() - self.margin_s - self.action_path_p95()

    def chunk_arrived(self, stamp: float, arrival: float) -> bool:
        """The chunk of an observation stamped `stamp` is ready at `arrival`: it becomes
        the plan in force. True if it came too late to take over in time (a miss)."""
        late = arrival > self.due()
        self.plan_stamp = stamp
        return late

    def reset(self) -> None:
        """Actions stopped (no fresh observations): the next chunk starts a new plan."""
        self.plan_stamp = None

    # -- the schedule -----------------------------------------------------------------------
    def next_start(self, frame_start: float) -> float:
        if self.period is None:
            return frame_start
        return min(frame_start + self.period, self.start_by())

    def language_until(self, frame_start: float, actions_done: float) -> float:
        """When this frame's language work must stop: the next frame's start, extended to
        the floor unless that makes the next chunk late while it could be on time."""
        if self.period is None:
            return math.inf
        next_start = self.next_start(frame_start)
        floor_end = actions_done + self.floor_s
        start_by = self.start_by()
        if floor_end <= start_by or start_by <= actions_done:
            return max(next_start, floor_end)
        return max(next_start, start_by)

    # -- what the machine can do --------------------------------------------------------------
    def recent_paths(self, count: int) -> list[float]:
        """The newest `count` action paths (fewer if the window holds fewer)."""
        return list(self.action_path)[-count:] if count > 0 else []

    def recent_frames(self, count: int) -> list[tuple[float, int]]:
        """The newest `count` action paths, each with the robots its frame served."""
        return list(zip(self.action_path, self.path_robots))[-count:] if count > 0 else []

    def capacity(self, paths: Optional[list[float]] = None) -> Optional[Capacity]:
        """Steady-state prediction from the measurements so far (None without any), or
        with these action paths in place of the window's."""
        paths = list(self.action_path) if paths is None else paths
        if self.period is None or not paths:
            return None
        latency = percentile(paths, 50)
        p95 = percentile(paths, 95)
        age = percentile(self.ages, 50) if self.ages else 0.0
        longest = self.horizon_s - self.blend_s - self.margin_s - p95 - age  # JIT bound
        # language after a chunk: what it used so far within its floor (before any
        # frame: the whole floor)
        language = min(self.floor_s, percentile(self.language, 50)) if self.language \
            else self.floor_s
        shortest = latency + language
        held = 0.0
        if shortest <= longest:
            period, plan_fed, floor_met = min(max(self.period, shortest), longest), True, True
        elif latency < longest:
            period, plan_fed, floor_met = longest, True, False
        else:
            period, plan_fed, floor_met = shortest, False, True
            held = max(0.0, period + latency + age - self.horizon_s) / period
        return Capacity(
            target_period_s=self.period, frame_period_s=period, action_path_s=latency,
            action_path_p95_s=p95, observation_age_s=age, chunk_age_s=age + latency,
            language_share=max(0.0, period - latency) / period, plan_fed=plan_fed,
            floor_met=floor_met, predicted_held_fraction=min(1.0, held))
