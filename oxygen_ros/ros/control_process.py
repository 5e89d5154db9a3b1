"""The control process: publishes the inference node's per-step commands at control_rate_hz
from the plans the node sends it (control_link.py says why a process of its own).

The whole process runs SCHED_FIFO at control_priority where the OS allows (every thread of
it: one that holds the interpreter lock must not wait for the CPU while a tick is due).
Its control loop (ControlLoop) runs the CommandGate — watchdog,
NaN guard, clamps, held steps — over an ActionStream of the node's plans; its main thread
takes the node's messages. While active it also publishes each plan it takes as a
JointTrajectory, and when the watchdog stops the actions or the node deactivates, a
trajectory that holds the last command (a joint_trajectory_controller would otherwise play
the last chunk's trajectory to its end): one publisher, under the lock the ticks take, so
no plan the commands dropped reaches the trajectory topic, and nothing after the hold.
It has no services (nothing here waits on a client) and ends
when the node's socket closes, on SIGINT or SIGTERM, or when a tick raised (exit code 1:
the node reports the control process stopped)."""

import argparse
import select
import signal
import socket
import sys
import threading
import time
from collections import Counter, deque

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import remove_ros_args
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from oxygen_ros.engine.action_stream import ActionStream
from oxygen_ros.ros import control_link, qos, trajectories
from oxygen_ros.ros.command_gate import CommandGate, StopMark
from oxygen_ros.ros.control_loop import ControlLoop, real_time_scheduling


class ControlProcess:
    def __init__(self, node: Node, link: socket.socket, args, monotonic=time.monotonic):
        self.link, self.clock, self.logger = link, node.get_clock(), node.get_logger()
        self.monotonic = monotonic
        self.publish = not args.dry_run
        self.publisher = node.create_publisher(Float64MultiArray, args.topic, qos.COMMAND)
        self.trajectories = node.create_publisher(
            JointTrajectory, args.trajectory_topic, qos.RELIABLE) \
            if self.publish and args.trajectory_topic else None
        self.joints = list(args.joints)
        self.period = 1.0 / args.rate
        self.counters: Counter = Counter()
        self.gate = CommandGate(args.lower, args.upper, args.watchdog, args.hold, self.counters)
        self.stream = ActionStream(args.blend)
        self.active = False
        self.stops = StopMark(args.watchdog, self.period)   # newest: the newest's arrival
        self._reported: Counter = Counter()
        self._times: deque = deque(maxlen=control_link.TIMES_KEPT)   # not yet reported
        self.ticks = 0
        self.status_every = control_link.status_every(args.rate)
        self.loop = ControlLoop(self.period, self.tick)
        # a tick (its thread) and a message (the main thread) change the plan one at a time
        self._lock = threading.Lock()

    def take(self, message: bytes) -> None:
        kind, fields = control_link.decode(message)
        # built before taking the lock the ticks wait on (`active` changes only here)
        trajectory = self._trajectory(*fields[:3]) if kind == control_link.PLAN else None
        with self._lock:
            self._take(kind, fields, trajectory)

    def _trajectory(self, actions, stamp_ns: int, dt: float):
        """A plan's trajectory, clamped, from the step due now (None: none is published)."""
        if not self.active or self.trajectories is None:
            return None
        clamped = self.gate.clip(actions)
        first = max(0, int((self.clock.now().nanoseconds - stamp_ns) * 1e-9 / dt))
        if first < len(actions):
            return trajectories.trajectory_msg(stamp_ns, clamped, dt, self.joints, first)
        # every step past before it came: the commands hold its last, and so does this
        return trajectories.hold_trajectory_msg(clamped[-1], self.joints, self.period)

    def _take(self, kind: bytes, fields, trajectory) -> None:
        if kind == control_link.PLAN:
            actions, stamp_ns, dt, now, observed = fields
            if self.stops.outdated(observed):
                self.counters["chunk_after_stop"] += 1
                return
            self.stream.push(actions, stamp_ns * 1e-9, dt, now)
            if trajectory is not None:
                self.trajectories.publish(trajectory)
        elif kind == control_link.OBSERVED:
            self.stops.observation(fields[0])
        elif kind == control_link.STATE:
            if self.active and not fields[0]:
                self._hold_trajectory(self.gate.last_command)
            self.active = fields[0]
            self.gate.restart()
            self.stream.clear()

    def tick(self) -> None:
        with self._lock:
            if self.active:
                self._command()
        self.ticks += 1
        if self.ticks % self.status_every == 0:
            self._report()

    def _command(self) -> None:
        newest = self.stops.newest
        age = None if newest is None else self.monotonic() - newest
        tick = self.gate.tick(
            age, lambda: self.stream.action_at(self.clock.now().nanoseconds * 1e-9))
        if tick.tripped:
            self.stream.clear()
            self.stops.stop(newest)
            self._hold_trajectory(self.gate.last_command)
            self.logger.error(f"no fresh observation for {age or float('inf'):.3f} s: "
                         "watchdog stops new actions")
        if tick.resumed:
            self.logger.info("observations are back: actions resume" if tick.after_trip
                             else "fresh observations: actions start")
        if tick.non_finite:
            self.counters["non_finite_command"] += 1
            self.logger.warning("non_finite_command: command skipped", throttle_duration_sec=5.0)
        if tick.command is not None:
            self._times.append(self.monotonic())
            self.counters["commands"] += 1
            if self.publish:
                self.publisher.publish(Float64MultiArray(data=tick.command.tolist()))

    def _hold_trajectory(self, command) -> None:
        """Replace the trajectory in force with one holding `command`, reached in a control
        tick (None: nothing was commanded, nothing to replace)."""
        if self.trajectories is None or command is None:
            return
        self.trajectories.publish(trajectories.hold_trajectory_msg(command, self.joints,
                                                                   self.period))
        self.counters["hold_trajectories"] += 1

    def _report(self) -> None:
        increments = [self.counters[name] - self._reported[name]
                      for name in control_link.COUNTERS]
        try:
            self.link.send(control_link.status_message(increments, self.gate.stale,
                                                        self.monotonic(), self._times))
        except OSError:   # the node is not reading (or gone): reported with the next one
            return
        self._reported.update(dict(zip(control_link.COUNTERS, increments)))
        self._times.clear()


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--priority", type=int, default=0)
    parser.add_argument("--watchdog", type=float, required=True)
    parser.add_argument("--lower", type=float, nargs="+", required=True)
    parser.add_argument("--upper", type=float, nargs="+", required=True)
    parser.add_argument("--blend", type=float, default=0.0)
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--trajectory-topic", default="")
    parser.add_argument("--joints", nargs="*", default=[])
    return parser.parse_args(argv)


def main(argv=None) -> int:
    argv = sys.argv if argv is None else argv
    args = parse(remove_ros_args(argv)[1:])
    refused, scheduling = real_time_scheduling(args.priority)   # before any thread starts
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    link = socket.socket(fileno=args.fd)
    link.setblocking(False)
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    node = Node("control", start_parameter_services=False)
    control = ControlProcess(node, link, args)
    executor = SingleThreadedExecutor()
    executor.add_node(node)           # /clock, with use_sim_time
    spinner = threading.Thread(target=lambda: _spin(executor, stop), daemon=True)
    spinner.start()
    control.loop.start()
    link.send(control_link.READY + (b"1" if refused else b"0") + scheduling.encode())
    try:
        while not stop.is_set() and control.loop.ticking():
            if not select.select([link], [], [], 0.1)[0]:
                continue
            try:
                message = link.recv(control_link.MAX_MESSAGE)
            except BlockingIOError:
                continue
            except OSError:       # reset: the node closed its end with messages unread
                break
            if not message:       # the node's end closed: it stopped or died
                break
            control.take(message)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
        stop.set()
        control.loop.stop()
        spinner.join(timeout=2.0)
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()
    return 1 if control.loop.error is not None else 0   # the node reports it stopped


def _spin(executor, stop: threading.Event) -> None:
    while not stop.is_set():
        executor.spin_once(timeout_sec=0.1)


if __name__ == "__main__":
    sys.exit(main())
