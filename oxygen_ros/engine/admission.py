"""RunTimeAdmission: which of a fleet's robots the OxyGen loop serves (mixed into
OxygenEngine; it uses the engine's robots, counters, scheduler and cache).

At start-up the robots are served in list order while the calibrated action path of that
many robots in one frame keeps every one at its targets; the rest are refused with the
numbers. At run time the verdict is kept from the action paths the robots actually get:
when they say the plans can no longer be kept fed (a busier machine than at start-up), the
last robots in list order are shed, with the numbers; a refused robot joins again once
every running robot's recent paths keep their targets, each scaled by the calibrated
action paths from the robots its frame served to every served robot and one more in one
frame."""

import statistics
from typing import Optional, Sequence

from oxygen_ros.engine.frame_timing import Capacity, FrameTiming
from oxygen_ros.engine.robot import Robot

SHED_AFTER = 8      # a served robot's action paths since the last admission change that judge
#                     shedding (a few frames: held commands are what shedding prevents)
READMIT_AFTER = 32  # the first running robot's frames in a row whose paths leave room
#                     before a refused robot is served (doubled each time it was shed, so
#                     that a load that comes and goes does not flap)


class RunTimeAdmission:
    def fleet_capacity(self, count: int) -> Optional[Capacity]:
        """What the first `count` robots would get, served in one frame each period, from
        the calibrated action path of that many (None before calibration)."""
        samples = self.fleet_paths.get(count)
        if not samples:
            return None
        timing = FrameTiming(self.config, self.model.config.action_horizon)
        for seconds in samples:
            timing.observe_action_path(seconds)
        return timing.capacity()

    def admit(self) -> None:
        """Serve the robots in list order while the measured capacity keeps every served
        robot at its targets; refuse the rest, saying with what numbers. The first robot is
        always served (as a single robot is: its diagnostics say when it misses targets).
        With admission off every robot is served."""
        names = list(self.robots) if self.config.admission else []
        for count in range(2, len(names) + 1):
            capacity = self.fleet_capacity(count)
            if capacity is None or capacity.meets_targets:
                continue
            served = self.fleet_capacity(count - 1)
            for name in names[count - 1:]:
                self.robots[name].refused = (
                    f"refused: {count} robots would miss their targets ({capacity.describe()}); "
                    f"{count - 1} are served ({served.describe() if served else 'unmeasured'})")
            return

    def mark_admission(self) -> None:
        """The served robots changed: judge from what is measured from now on."""
        self.admission_marks = {name: robot.timing.observed
                                for name, robot in self.robots.items()}
        self.room_frames = 0

    def review_admission(self, served: Sequence[Robot]) -> None:
        """Admission at run time, after a frame that served `served`. A running robot
        (served, plan in force) with SHED_AFTER paths since the last change is judged on the
        newest SHED_AFTER less the slowest (one stall sheds nobody). If they say its plan
        cannot be kept fed, the running robots are cut to the most (at least the first)
        whose calibrated action path, in proportion to its newest path (the load now), would
        keep it fed; the rest are shed. Else the first refused robot — shed, or refused at start-up — is served
        once, for READMIT_AFTER of the first running robot's frames in a row (x 2 for each
        time it was shed, at most x 8; robots on other phases judge in between, but do not
        count), every running robot's paths since the last change, each scaled from the
        calibrated action path of the robots its frame served to that of every served robot
        and one more, have kept it at its targets."""
        if not self.config.admission:
            return
        running = [robot for robot in self.robots.values()
                   if not robot.refused and robot.timing.plan_stamp is not None]
        new = {robot.name: robot.timing.observed - self.admission_marks.get(robot.name, 0)
               for robot in running}
        for robot in running:
            if len(running) < 2 or new[robot.name] < SHED_AFTER:
                continue
            judged = sorted(robot.timing.recent_paths(SHED_AFTER))[:-1]
            capacity = robot.timing.capacity(judged)
            if capacity is not None and not capacity.plan_fed:
                kept = self.robots_kept(running, robot)
                for each in reversed(running[kept:]):
                    self.shed(each, len(running), robot.name, capacity, kept)
                self.mark_admission()
                return
        refused = [robot for robot in self.robots.values() if robot.refused]
        if not refused or not running or min(new.values()) < SHED_AFTER:
            return
        # scaled to every served robot and one more: a served robot's camera that is off
        # now (no plan in force) may come back
        serving = sum(not robot.refused for robot in self.robots.values())
        predicted = {robot.name: self.scaled_paths(robot, new[robot.name], serving + 1)
                     for robot in running}
        if any(paths is None for paths in predicted.values()):
            return
        capacities = [robot.timing.capacity(predicted[robot.name]) for robot in running]
        room = all(capacity is not None and capacity.meets_targets for capacity in capacities)
        if not room:
            self.room_frames = 0
        elif any(robot is running[0] for robot in served):
            self.room_frames += 1
        joining = refused[0]
        if self.room_frames >= READMIT_AFTER * 2 ** min(joining.times_shed, 3):
            joining.refused = ""
            joining.timing.forget_action_paths()   # those before the shed say nothing now
            for seconds in predicted[running[0].name]:
                joining.timing.observe_action_path(seconds, serving + 1)
            self.counters["robots_readmitted"] += 1
            self.mark_admission()

    def calibrated(self, count: int) -> float:
        """The calibrated action path of `count` robots in one frame (0: not measured)."""
        return statistics.median(self.fleet_paths.get(count) or [0.0])

    def scaled_paths(self, robot: Robot, count: int, robots: int) -> Optional[list[float]]:
        """`robot`'s newest `count` action paths, each scaled from the calibrated path of
        the robots its frame served to that of `robots` robots in one frame: the load now,
        on that many (None where a count is not calibrated)."""
        target = self.calibrated(robots)
        frames = robot.timing.recent_frames(count)
        calibrated = [self.calibrated(size) for _, size in frames]
        if not target or not all(calibrated):
            return None
        return [seconds * target / size for (seconds, _), size in zip(frames, calibrated)]

    def robots_kept(self, running: Sequence[Robot], judged: Robot) -> int:
        """How many of the running robots to keep: the most (fewer than now, at least one)
        for which `judged`'s newest path, scaled to that many robots in one frame, would
        keep its plan fed."""
        for kept in range(len(running) - 1, 1, -1):
            paths = self.scaled_paths(judged, 1, kept)
            if paths is None:            # not calibrated: one robot fewer
                return len(running) - 1
            capacity = judged.timing.capacity(paths)
            if capacity is None or capacity.plan_fed:
                return kept
        return 1

    def shed(self, robot: Robot, running: int, judged: str, capacity, kept: int) -> None:
        """Stop serving `robot`: its requests end robot_refused (a memory window in flight
        is abandoned; the next starts when it is served again), its newest prefix is
        unpinned; its reason says with what numbers."""
        robot.refused = (f"shed at run time: with {running} robots running, robot "
                         f"{judged}'s plan could not be kept fed "
                         f"({capacity.describe()}); {kept} of the {running} running are kept")
        self.counters["robots_shed"] += 1
        robot.times_shed += 1
        for request in (*self.scheduler.running, *self.scheduler.waiting):
            if request.robot == robot.name:
                self._finish(request, "robot_refused")
        robot.memory.restart()
        self.release_newest(robot)
