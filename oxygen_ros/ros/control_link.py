"""ControlLink: the inference node's end of its control process (no ROS).

The per-step commands are published by a process of their own (control_process.py): in the
node's process every thread waits for the one interpreter lock, and rclpy holds it through
calls that block — a service response to a client DDS has not matched yet waits up to the
writer's max_blocking_time (Fast DDS: 100 ms) — so a `ros2 param list` held the commands
for up to 640 ms. The node tells its control process, over a socketpair of ordered, atomic
messages, what the commands come from: each new plan, each observation's arrival, whether
it is active; the control process answers with what it did. When the node's process
ends, its socket closes and the control process ends with it."""

import os
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import MutableMapping, Optional, Sequence

import numpy as np

from oxygen_ros.ros.control_dds import control_environment

PLAN, OBSERVED, STATE, READY, STATUS = b"P", b"O", b"S", b"R", b"T"
COUNTERS = ("commands", "held_commands", "clamped_values", "watchdog_trips",
            "non_finite_command", "chunk_after_stop", "hold_trajectories")
_PLAN = struct.Struct("<qdddII")          # stamp (ns), dt, now, observed, steps, joints
_STATUS = struct.Struct(f"<{len(COUNTERS)}q?dI")  # increments, stale, sent at, command times
TIMES_KEPT = 2000      # command times: two seconds at the highest control_rate_hz
MAX_MESSAGE = 1 << 20
READY_S = 30.0          # the control process's start (it imports rclpy)


def plan_message(actions: np.ndarray, stamp_ns: int, dt: float, now: float,
                 observed: float) -> bytes:
    """A new chunk from the observation stamped `stamp_ns` (ROS time); observed: when that
    observation reached the node (monotonic; NaN if no longer known)."""
    actions = np.ascontiguousarray(actions, dtype=np.float64)
    return PLAN + _PLAN.pack(stamp_ns, dt, now, observed, *actions.shape) + actions.tobytes()


def observed_message(arrival_monotonic: float) -> bytes:
    return OBSERVED + struct.pack("<d", arrival_monotonic)


def state_message(active: bool) -> bytes:
    return STATE + struct.pack("<?", active)


def status_message(increments: Sequence[int], stale: bool, sent_at: float,
                   times: Sequence[float]) -> bytes:
    return (STATUS + _STATUS.pack(*increments, stale, sent_at, len(times))
            + struct.pack(f"<{len(times)}d", *times))


def decode(message: bytes):
    """(kind, fields) of one message."""
    kind, body = message[:1], message[1:]
    if kind == PLAN:
        stamp_ns, dt, now, observed, steps, joints = _PLAN.unpack_from(body)
        actions = np.frombuffer(body, np.float64, steps * joints, _PLAN.size)
        return kind, (actions.reshape(steps, joints), stamp_ns, dt, now, observed)
    if kind == OBSERVED:
        return kind, struct.unpack("<d", body)
    if kind == STATE:
        return kind, struct.unpack("<?", body)
    if kind == READY:
        return kind, (body[:1] == b"1", body[1:].decode())
    if kind == STATUS:
        *increments, stale, sent_at, count = _STATUS.unpack_from(body)
        times = struct.unpack_from(f"<{count}d", body, _STATUS.size)
        return kind, (dict(zip(COUNTERS, increments)), stale, sent_at, times)
    raise ValueError(f"unknown control message {kind!r}")


@dataclass(frozen=True)
class ControlSettings:
    """What the control process is started with; a reconfigure with equal settings keeps
    the running one."""
    node_name: str
    namespace: str
    topic: str
    rate_hz: float
    priority: int
    lower: tuple
    upper: tuple
    watchdog_s: float
    hold: bool
    blend_s: float
    publish: bool
    use_sim_time: bool
    trajectory_topic: str = ""     # where the plans' and the stops' trajectories go ("": none)
    joint_names: tuple = ()

    def argv(self, fd: int) -> list[str]:
        return [sys.executable, "-m", "oxygen_ros.ros.control_process",
                "--fd", str(fd), "--topic", self.topic, "--rate", repr(self.rate_hz),
                "--priority", str(self.priority), "--watchdog", repr(self.watchdog_s),
                "--blend", repr(self.blend_s), "--lower", *map(repr, self.lower),
                "--upper", *map(repr, self.upper)] \
            + (["--hold"] if self.hold else []) + ([] if self.publish else ["--dry-run"]) \
            + (["--trajectory-topic", self.trajectory_topic, "--joints", *self.joint_names]
               if self.trajectory_topic else []) \
            + ["--ros-args", "-r", f"__node:={self.node_name}_control",
               "-r", f"__ns:={self.namespace}",
               "-p", f"use_sim_time:={str(self.use_sim_time).lower()}",
               # no services: a response to a new client blocks (see above)
               "-p", "start_type_description_service:=false"]


class ControlLink:
    """Starts the control process and talks to it. Sends never block: a control process
    that stopped reading loses messages instead of stalling the node."""

    def __init__(self, settings: ControlSettings):
        self.settings = settings
        self._socket, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for end in (self._socket, child):
            end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_MESSAGE)
        argv = settings.argv(child.fileno())
        # a process group of its own: a shell's Ctrl-C (SIGINT to the node's group) must not
        # kill it while it imports rclpy; it ends when this end of the socket closes
        self.process = subprocess.Popen(argv, pass_fds=(child.fileno(),), process_group=0,
                                        env=control_environment(os.environ))
        child.close()
        self._socket.setblocking(False)
        self.stale = True        # the watchdog's state, as last reported
        self.refused, self.scheduling = self._wait_ready()
        self.reported_at = time.monotonic()   # when the control process last reported
        self.lost_messages = 0

    def _wait_ready(self) -> tuple[bool, str]:
        self._socket.settimeout(READY_S)
        try:
            message = self._socket.recv(MAX_MESSAGE)
        except socket.timeout:
            message = b""
        finally:
            self._socket.setblocking(False)
        if message[:1] != READY:
            code = self.process.poll()
            self.close()
            raise RuntimeError(f"the control process did not start within {READY_S:.0f} s"
                               if code is None else
                               f"the control process ended (exit code {code}) before it "
                               "was ready")
        return decode(message)[1]

    def send(self, message: bytes) -> None:
        try:
            self._socket.send(message)
        except (BlockingIOError, BrokenPipeError, ConnectionResetError, OSError):
            self.lost_messages += 1

    def poll(self, counters: MutableMapping[str, int]) -> list[float]:
        """Take in every status report that arrived: their counts are added to `counters`;
        the monotonic times of the commands they report."""
        times = []
        while True:
            try:
                message = self._socket.recv(MAX_MESSAGE)
            except OSError:       # nothing more (BlockingIOError), or closed
                break
            if not message:
                break
            kind, fields = decode(message)
            if kind == STATUS:
                increments, self.stale, self.reported_at, reported = fields
                for name, n in increments.items():
                    counters[name] += n
                times.extend(reported)
        return times

    def running(self) -> bool:
        return self.process.poll() is None

    def silent(self) -> Optional[float]:
        """Seconds since the control process last reported, once that is overdue (a tick
        that hangs); None while it reports."""
        silence = time.monotonic() - self.reported_at
        return silence if silence > report_overdue(self.settings.rate_hz) else None

    def close(self, timeout_s: float = 5.0) -> Optional[int]:
        """End the control process (its socket closes: it stops at once); its exit code.
        Sends after this are lost (counted), not errors."""
        self._socket.close()
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()



def status_every(rate_hz: float) -> int:
    """Control ticks between status reports: every 0.1 s, every fifth tick below 50 Hz."""
    return max(5, round(rate_hz / 10))


def report_overdue(rate_hz: float) -> float:
    """How long without a status report means the control process hangs: four reports'
    time, at least a second."""
    return max(1.0, 4 * status_every(rate_hz) / rate_hz)


def running_link(link: Optional[ControlLink], settings: ControlSettings) -> ControlLink:
    """`link` where it runs with these settings, else a new one (the old one closed): a new
    control process is a new DDS participant, and each grew the node by ~0.6 MB."""
    if link is not None and link.settings == settings and link.running():
        return link
    if link is not None:
        link.close()
    return ControlLink(settings)
