"""FrameLoop: what the engine thread does next — a frame for the robots whose newer
observation is due, language alone while observations are absent, or a wait. The inference
node runs it on the wall clock; tests run the same decisions on a manual clock.

With several robots, frames go earliest deadline first: the robot whose plan in force needs
a successor soonest (its next_frame_at) is served first, and every other robot with a newer
observation due within one action path of now joins the same frame (one batched pass)."""

from typing import Mapping, Optional

from oxygen_ros.engine.observation import Observation
from oxygen_ros.engine.oxygen import OxygenEngine


class FrameLoop:
    def __init__(self, engine: OxygenEngine, poll_s: float = 0.02):
        self.engine = engine
        self.poll_s = poll_s
        self.last_stamps: dict[str, float] = {}   # per robot: observation of its plan in force
        self.next_idle_at = -float("inf")

    def run_robots(self, newest: Mapping[str, Optional[Observation]]) -> float:
        """One unit of work given each robot's newest fresh observation (None: none is
        fresh, that robot's actions are stopped); returns how long the caller may sleep
        before the next call."""
        engine, now = self.engine, self.engine.clock.now()
        engine.drain()   # a cancelled request frees its pages now, not at the next frame
        due: dict[str, float] = {}
        fresh = []
        for name, observation in newest.items():
            robot = engine.robot_of(name)
            if observation is None or robot.refused:
                if self.last_stamps.pop(name, None) is not None:
                    robot.stop_actions()
                continue
            planned = name in self.last_stamps and robot.next_frame_at is not None
            due[name] = robot.next_frame_at if planned else -float("inf")
            if not planned or observation.stamp > self.last_stamps[name]:
                fresh.append(observation)
        if not due:
            return self._idle(now)
        ready = sorted((o for o in fresh if due[o.robot] <= now), key=lambda o: due[o.robot])
        if not ready:
            waits = [due[name] - now for name in due if due[name] > now]
            if len(waits) == len(due) == len(newest):   # every robot waits for its due time
                return min(waits)
            return min([self.poll_s, *waits])          # a robot's observation may come
        window = engine.robot_of(ready[0].robot).timing.action_path_p95()
        joining = sorted((o for o in fresh if now < due[o.robot] <= now + window),
                         key=lambda o: due[o.robot])
        served = ready + joining
        for observation in served:
            self.last_stamps[observation.robot] = observation.stamp
        engine.serve(served, frame_start=now)
        return 0.0

    def _idle(self, now: float) -> float:
        """Idle frames at most once per frame period, only while language has work."""
        if not self.engine.has_language_work():
            return self.poll_s
        if now < self.next_idle_at:
            return min(self.poll_s, self.next_idle_at - now)
        period = self.engine.config.frame_period_s
        self.next_idle_at = now + (period or 0.0)
        self.engine.idle_step(until=now + period if period else None)
        return 0.0
