"""ActionStream: per-step commands at any control rate from the latest action chunk.

A chunk's step i is meant for time stamp + i * dt, where stamp is the time of the
observation it was computed from; the steps that elapsed while the model ran are skipped
by construction. Between steps the command is interpolated linearly, so the control rate
need not match the chunk's dt. When a new chunk arrives the stream cross-fades from the
old plan to the new one over `blend_s` seconds (weight rising linearly from 0 to 1); with
blend_s 0 it switches at once — what chunk_switch rtc uses, since a Real-Time Chunking chunk
already continues the plan it replaces (engine/rtc.py), and chunk_switch none.

Thread safety: push() builds a new immutable Plan and swaps one reference; action_at()
reads that reference once. No lock is shared between the inference thread and the
control timer.
"""

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np

MAX_FADES = 8   # plans one command blends at most (more only while time stands still)


@dataclass(frozen=True)
class Plan:
    actions: np.ndarray          # [H, D], read-only
    stamp: float                 # time of step 0
    dt: float
    previous: Optional["Plan"]   # the plan being faded out (itself fading in, perhaps)
    switch_time: float           # when this plan took over
    blend_s: float

    def raw(self, now: float) -> tuple[np.ndarray, bool]:
        """(command at `now` without blending, True if the plan has run out). Step i is the
        command for [stamp + i·dt, stamp + (i+1)·dt): a plan of H steps covers H·dt."""
        position = (now - self.stamp) / self.dt
        last = len(self.actions) - 1
        if position >= last:
            return self.actions[last], position >= len(self.actions)
        if position <= 0:
            return self.actions[0], False
        low = int(position)
        frac = position - low
        return (1 - frac) * self.actions[low] + frac * self.actions[low + 1], False

    def command(self, now: float) -> tuple[np.ndarray, bool]:
        """(command at `now`, True if the plan has run out): raw, faded in from what the
        previous plan commanded (itself perhaps still fading in) until blend_s is over."""
        command, exhausted = self.raw(now)
        if self.previous is not None and self.blend_s > 0:
            weight = (now - self.switch_time) / self.blend_s
            if weight < 1.0:
                old, _ = self.previous.command(now)
                weight = max(weight, 0.0)
                command = (1 - weight) * old + weight * command
        return command, exhausted

    def trimmed(self, now: float, keep: int) -> "Plan":
        """This plan without the plans its command no longer reads from `now` on: those
        before the newest one whose fade-in is over, and any beyond `keep` (this one
        included)."""
        if self.previous is None:
            return self
        if keep <= 1 or now - self.switch_time >= self.blend_s:
            return dataclasses.replace(self, previous=None)
        return dataclasses.replace(self, previous=self.previous.trimmed(now, keep - 1))


class ActionStream:
    def __init__(self, blend_s: float = 0.1):
        self.blend_s = blend_s
        self._plan: Optional[Plan] = None

    @property
    def plan(self) -> Optional[Plan]:
        return self._plan

    def push(self, actions: np.ndarray, stamp: float, dt: float, now: float) -> None:
        """Switch to a new chunk computed from an observation taken at `stamp`."""
        actions = np.array(actions, dtype=np.float64)
        actions.setflags(write=False)
        previous = None if self._plan is None else self._plan.trimmed(now, MAX_FADES - 1)
        self._plan = Plan(actions, stamp, dt, previous, now, self.blend_s)

    def action_at(self, now: float) -> Optional[tuple[np.ndarray, bool]]:
        """(command for time `now`, exhausted) or None before the first chunk.
        exhausted: the newest plan has no step left for `now` (the last step is held)."""
        plan = self._plan
        return None if plan is None else plan.command(now)

    def clear(self) -> None:
        self._plan = None
