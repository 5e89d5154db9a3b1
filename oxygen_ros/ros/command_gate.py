"""The control tick's logic: watchdog, NaN guard, clamps, held steps, hold-last; and which
chunks a stopped robot may no longer play (no ROS)."""

import math
from dataclasses import dataclass
from typing import Callable, MutableMapping, Optional

import numpy as np


@dataclass
class Tick:
    command: Optional[np.ndarray] = None   # to publish; None: nothing this tick
    tripped: bool = False                  # the watchdog stopped new actions this tick
    resumed: bool = False                  # fresh observations: actions start or resume
    after_trip: bool = False               # resumed after a watchdog stop, not a start
    non_finite: bool = False               # the command held NaN or inf and was skipped


WAITING = "waiting"     # for the first fresh observation since activation
ACTING = "acting"
STOPPED = "stopped"     # by the watchdog, until a fresh observation resumes the actions


class CommandGate:
    """Between the newest chunk and the robot: per control tick, the command that goes out.

    Counts watchdog_trips, held_commands and clamped_values in `counters`."""

    def __init__(self, lower, upper, watchdog_s: float, hold: bool,
                 counters: MutableMapping[str, int]):
        self.lower = np.asarray(lower, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        self.watchdog_s, self.hold, self.counters = watchdog_s, hold, counters
        self.state = WAITING
        self.last_command: Optional[np.ndarray] = None

    def restart(self) -> None:
        """Activated or deactivated: wait for a fresh observation, and hold nothing from
        before (the robot may have been moved meanwhile)."""
        self.state = WAITING
        self.last_command = None

    @property
    def stale(self) -> bool:
        """No fresh observation lets the robot act."""
        return self.state != ACTING

    def fresh(self, age_s: Optional[float]) -> bool:
        """An observation age_s old (None: none yet) is recent enough to act on."""
        return age_s is not None and age_s <= self.watchdog_s

    def clip(self, actions: np.ndarray) -> np.ndarray:
        return np.clip(actions, self.lower, self.upper)

    def tick(self, age_s: Optional[float],
             action_at: Callable[[], Optional[tuple]]) -> Tick:
        """One control tick; action_at() gives (command, steps past the chunk's end) or None."""
        if not self.fresh(age_s):
            tripped = self.state == ACTING
            if tripped:
                self.state = STOPPED
                self.counters["watchdog_trips"] += 1
            return Tick(self.last_command if self.hold else None, tripped=tripped)
        tick = Tick(resumed=self.state != ACTING, after_trip=self.state == STOPPED)
        self.state = ACTING
        result = action_at()
        if result is None:       # no plan: a stop cleared it, or no chunk came yet
            if self.hold and self.last_command is not None:
                self.counters["held_commands"] += 1      # held until a fresh chunk comes
                tick.command = self.last_command
            return tick
        command, exhausted = result
        self.counters["held_commands"] += exhausted
        if not np.isfinite(command).all():
            tick.non_finite = True
            return tick
        tick.command = self.last_command = self.clip(command)
        self.counters["clamped_values"] += int((tick.command != command).sum())
        return tick


class StopMark:
    """When the watchdog last stopped the actions, as the receipt time of the newest
    observation then. A chunk computed from that observation or an older one (a frame still
    running at the stop) is outdated: the stopped robot resumes on a chunk from a fresh
    observation, not on the plan it was stopped in."""

    def __init__(self, watchdog_s: float, tick_s: float):
        # a gap this long between observations holds a control tick that saw it stale
        self.gap_s = watchdog_s + tick_s
        self.newest: Optional[float] = None   # receipt time of the newest observation
        self.after = -math.inf

    def observation(self, arrival: float) -> None:
        """An observation reached the node at `arrival`: a gap before it that no control
        tick could miss was a stop."""
        if self.newest is not None and arrival - self.newest > self.gap_s:
            self.stop(self.newest)
        self.newest = arrival

    def stop(self, newest: float) -> None:
        """The watchdog stopped the actions, judging the observation received at `newest`
        too old."""
        self.after = max(self.after, newest)

    def outdated(self, observed: float) -> bool:
        """A chunk from the observation received at `observed` (NaN: unknown, not
        outdated) was computed before the last stop."""
        return observed <= self.after
