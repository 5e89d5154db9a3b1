"""FrameLoop: what the engine thread does next — a frame for the robots whose newer
observation is due, language alone while observations are absent or a robot's frame is
skipped (none newer than its plan's half a period after it was due: a camera slower than
the frame period, or paused), or a wait. The inference node runs it on the wall clock;
tests run the same decisions on a manual clock.

With several robots, frames go earliest deadline first: the robot whose plan in force needs
a successor soonest (its next_frame_at) is served first, and every other robot with a newer
observation due within one action path of now joins the same frame (one batched pass)."""

from typing import Callable, Mapping, Optional

from oxygen_ros.engine.observation import Observation
from oxygen_ros.engine.oxygen import OxygenEngine


class FrameLoop:
    def __init__(self, engine: OxygenEngine, poll_s: float = 0.02,
                 observations: Optional[Callable[[], Mapping[str, Optional[Observation]]]]
                 = None):
        self.engine = engine
        self.poll_s = poll_s
        # each robot's newest fresh observation now, as run_robots is given it: one that
        # makes a frame ready ends idle language (None: idle language runs its course)
        self.observations = observations
        self.last_stamps: dict[str, float] = {}   # per robot: observation of its plan in force
        self.next_idle_at = -float("inf")

    def run_robots(self, newest: Mapping[str, Optional[Observation]]) -> float:
        """One unit of work given each robot's newest fresh observation (None: none is
        fresh, that robot's actions are stopped); returns how long the caller may sleep
        before the next call."""
        engine, now = self.engine, self.engine.clock.now()
        engine.drain()   # a cancelled request frees its pages now, not at the next frame
        for name, observation in newest.items():
            robot = engine.robot_of(name)
            if (observation is None or robot.refused) and \
                    self.last_stamps.pop(name, None) is not None:
                robot.stop_actions()
        due, fresh = self._due(newest)
        if not due:
            return self._idle(now)
        ready = sorted((o for o in fresh if due[o.robot] <= now), key=lambda o: due[o.robot])
        if not ready:
            waits = [due[name] - now for name in due if due[name] > now]
            if len(waits) == len(due) == len(newest):   # every robot waits for its due time
                return min(waits)
            wait = min([self.poll_s, *waits])          # a robot's observation may come
            half = 0.5 * (engine.config.frame_period_s or 0.0)
            if half and any(due[name] <= now - half for name in due):   # a skipped frame
                return self._idle(now, until=min([now + half, *(now + w for w in waits)]),
                                  otherwise=wait)
            return wait
        window = engine.robot_of(ready[0].robot).timing.action_path_p95()
        joining = sorted((o for o in fresh if now < due[o.robot] <= now + window),
                         key=lambda o: due[o.robot])
        served = ready + joining
        for observation in served:
            self.last_stamps[observation.robot] = observation.stamp
        engine.serve(served, frame_start=now)
        return 0.0

    def _due(self, newest: Mapping[str, Optional[Observation]]) -> tuple[dict, list]:
        """When each robot with a fresh observation is due (-inf: no plan in force), and
        the observations newer than their robot's plan's."""
        due: dict[str, float] = {}
        fresh = []
        for name, observation in newest.items():
            robot = self.engine.robot_of(name)
            if observation is None or robot.refused:
                continue
            planned = name in self.last_stamps and robot.next_frame_at is not None
            due[name] = robot.next_frame_at if planned else -float("inf")
            if not planned or observation.stamp > self.last_stamps[name]:
                fresh.append(observation)
        return due, fresh

    def _frame_ready(self) -> bool:
        """An observation that came makes a frame ready now."""
        due, fresh = self._due(self.observations())
        now = self.engine.clock.now()
        return any(due[observation.robot] <= now for observation in fresh)

    def _idle(self, now: float, until: Optional[float] = None,
              otherwise: Optional[float] = None) -> float:
        """Idle frames (language until `until`, default a frame period on, or until an
        observation makes a frame ready) at most once per frame period, only while language
        has work; else a wait (`otherwise`, default poll_s, or until the next idle frame)."""
        wait = self.poll_s if otherwise is None else otherwise
        if not self.engine.has_language_work():
            return wait
        if now < self.next_idle_at:
            return min(wait, self.next_idle_at - now)
        period = self.engine.config.frame_period_s
        self.next_idle_at = now + (period or 0.0)
        self.engine.idle_step(until=until if until is not None
                              else now + period if period else None,
                              interrupted=self._frame_ready if self.observations else None)
        return 0.0
