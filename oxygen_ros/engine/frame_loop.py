"""FrameLoop: what the engine thread does next — a frame on a newer observation once one is
due, language alone while observations are absent, or a wait. The inference node runs it
on the wall clock; tests run the same decisions on a manual clock."""

from typing import Optional

from oxygen_ros.engine.observation import Observation
from oxygen_ros.engine.oxygen import OxygenEngine


class FrameLoop:
    def __init__(self, engine: OxygenEngine, poll_s: float = 0.02):
        self.engine = engine
        self.poll_s = poll_s
        self.last_stamp: Optional[float] = None    # observation of the plan in force
        self.next_idle_at = -float("inf")

    def run_once(self, observation: Optional[Observation]) -> float:
        """One unit of work given the newest fresh observation (None: none is fresh, actions
        are stopped); returns how long the caller may sleep before the next call."""
        engine, now = self.engine, self.engine.clock.now()
        engine.drain()   # a cancelled request frees its pages now, not at the next frame
        if observation is None:
            if self.last_stamp is not None:   # actions stopped: the next chunk starts anew
                self.last_stamp = None
                engine.timing.reset()
            return self._idle(now)
        due = engine.next_frame_at
        if due is not None and now < due and self.last_stamp is not None:
            return due - now
        if self.last_stamp is not None and observation.stamp <= self.last_stamp:
            return self.poll_s                 # wait for a newer observation
        self.last_stamp = observation.stamp
        engine.step(observation, frame_start=now)
        return 0.0

    def _idle(self, now: float) -> float:
        """Idle frames at most once per frame period, only while language has work."""
        if not self.engine.has_language_work():
            return self.poll_s
        if now < self.next_idle_at:
            return min(self.poll_s, self.next_idle_at - now)
        period = self.engine.config.frame_period_s or 0.0
        self.next_idle_at = now + period
        self.engine.idle_step(until=now + period if period else None)
        return 0.0
