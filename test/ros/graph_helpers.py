"""Helpers for graph tests: parameter files for a tiny-preset graph, a probe node that
records what the inference node publishes (written independently of ros/monitor.py), and
service calls (the lifecycle ones too) that survive a lost response."""

import sys
import time
from pathlib import Path

import yaml

from oxygen_ros.process_memory import rss_bytes

CAMERAS = ["base", "left_wrist"]
JOINTS = [f"joint_{i}" for i in range(6)]


def write_params(path: Path, ingest=None, inference=None) -> Path:
    """A parameters file for camera_ingest + inference on the tiny preset (2 cameras)."""
    params = {
        "camera_ingest": {"ros__parameters": {
            "camera_topics": ["/cameras/base/image_raw", "/cameras/left_wrist/image_raw"],
            "camera_names": CAMERAS, "image_size": 28, "max_delay_s": 0.1,
            "diagnostics_period_s": 0.5} | (ingest or {})},
        "inference": {"ros__parameters": {
            "preset": "tiny", "camera_names": CAMERAS, "joint_names": JOINTS,
            "joint_lower_limits": [-5.0] * 6, "joint_upper_limits": [5.0] * 6,
            "dry_run": False, "frame_period_s": 0.05, "control_rate_hz": 50.0,
            "action_dt_s": 0.1, "blend_s": 0.05,   # tiny: H = 4 steps cover 0.4 s
            "dialogue_max_tokens": 12, "memory_period_s": 1.0,
            "watchdog_ticks": 5, "diagnostics_period_s": 0.5,
            "default_instruction": ""} | (inference or {})},
    }
    path.write_text(yaml.dump(params, Dumper=_NoAliases))  # rcl's parser refuses aliases
    return path


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def rss_mb(pid: int) -> float:
    """A node process's resident memory now; it must still be running."""
    rss = rss_bytes(pid)
    assert rss, f"process {pid} is gone"
    return rss / 2**20


def executable(name: str) -> Path:
    path = Path(sys.prefix) / "lib" / "oxygen_ros" / name
    assert path.exists(), f"{path} missing: run `make setup`"
    return path


class Probe:
    """Subscribes to the graph's outputs from the test process."""

    def __init__(self, context, robot: str = ""):
        from diagnostic_msgs.msg import DiagnosticArray
        from oxygen_ros.msg import (
            ActionChunk,
            DialogueChunk,
            MemorySummary,
            Observation,
        )
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from std_msgs.msg import Float64MultiArray, String
        from trajectory_msgs.msg import JointTrajectory

        from oxygen_ros.ros import qos

        # a robot's topics are under /<robot>/ (written out here, not robot_port's helper)
        topic = (lambda name: f"/{robot}{name}") if robot else (lambda name: name)
        self.node = Node(f"probe_{robot}" if robot else "probe", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.commands, self.chunks, self.dialogue, self.memory = [], [], [], []
        self.trajectories = []
        self.observations, self.diagnostics, self.reports = [], {}, []
        self.by_reporter = {}     # (status name, hardware id) -> (level, message), newest
        self.messages = {}        # status name -> every message, in the order they came
        sub = self.node.create_subscription
        sub(Float64MultiArray, topic("/oxygen/joint_command"),
            lambda m: self.commands.append((time.monotonic(), list(m.data))), qos.COMMAND)
        sub(ActionChunk, topic("/oxygen/action_chunk"), self.chunks.append, qos.RELIABLE)
        sub(JointTrajectory, topic("/oxygen/joint_trajectory"), self.trajectories.append,
            qos.RELIABLE)
        sub(DialogueChunk, topic("/oxygen/dialogue"), self.dialogue.append, qos.RELIABLE_DEEP)
        sub(MemorySummary, topic("/oxygen/memory"), self.memory.append, qos.RELIABLE)
        sub(Observation, topic("/oxygen/observation"),
            lambda m: self.observations.append((time.monotonic(), m)), qos.RELIABLE)
        sub(DiagnosticArray, "/diagnostics", self._on_diagnostics, qos.RELIABLE)
        self.requests = self.node.create_publisher(String, topic("/oxygen/dialogue/request"),
                                                   qos.RELIABLE_DEEP)

    def _on_diagnostics(self, msg):
        for status in msg.status:
            values = {v.key: v.value for v in status.values}
            self.diagnostics[status.name] = (status.level[0], status.message, values,
                                             time.monotonic())
            self.by_reporter[(status.name, status.hardware_id)] = (status.level[0],
                                                                   status.message)
            self.messages.setdefault(status.name, []).append(status.message)
            self.reports.append((msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec,
                                 status.name, values))

    def spin(self, seconds: float, until=None) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if until is not None and until():
                return True
            self.executor.spin_once(timeout_sec=0.01)
        return until() if until is not None else True

    def counter(self, node: str, key: str) -> int:
        entry = self.diagnostics.get(f"oxygen_ros: {node}")
        return int(entry[2].get(key, 0)) if entry else 0

    def reports_of(self, node: str) -> list:
        """(stamp ns, values) of every report `node` published, in the order they came."""
        return [(stamp, values) for stamp, name, values in self.reports
                if name == f"oxygen_ros: {node}"]

    def report_after(self, node: str, stamp_ns: int, timeout: float = 60.0) -> None:
        """Wait for a report of `node` stamped (its clock: the system clock here) after
        stamp_ns. One publisher's reports arrive in order, so every earlier one is in then.

        Reports are judged by the node's stamps, never by when they arrive here: this
        process's receipt times also hold its own scheduling (niced beside two suites, six
        reports arrived in one 3 s window)."""
        assert self.spin(timeout, until=lambda: any(
            stamp > stamp_ns for stamp, _ in self.reports_of(node))), \
            (f"no {node} report stamped after", stamp_ns,
             [stamp for stamp, _ in self.reports_of(node)][-5:])

    def reports_stamped(self, node: str, since_ns: int, until_ns: int,
                        timeout: float = 60.0) -> list:
        """The values of every report `node` stamped in (since_ns, until_ns], each about the
        second before its stamp, once a later one has arrived."""
        self.report_after(node, until_ns, timeout)
        return [values for stamp, values in self.reports_of(node)
                if since_ns < stamp <= until_ns]

    def close(self):
        self.executor.remove_node(self.node)
        self.node.destroy_node()


RESEND_S = 10.0


def ask_ready(probe, clients, node, timeout: float = 60.0) -> None:
    """Every Ask client sees the server, and the inference node counts them all in
    /diagnostics (ask_clients): a goal sent sooner can lose its response on a loaded machine,
    the server's writer not yet matched with the client's reader (docs/requests.md)."""
    assert all(c.wait_for_server(timeout_sec=timeout) for c in clients), \
        "".join(node.lines)[-2000:]
    counted = lambda: probe.counter("inference", "ask_clients")  # noqa: E731
    assert probe.spin(timeout, until=lambda: counted() >= len(clients)), \
        (counted(), len(clients), "".join(node.lines)[-2000:])


def call(probe, client, request, node, timeout: float = 30.0):
    """The service's response within `timeout` s. An unanswered request is sent again every
    RESEND_S: a response can be lost when the server's response writer has not yet matched
    this client's reader (rmw_fastrtps waits only briefly for it, ros2/rmw_fastrtps#390),
    which a loaded machine makes likely on a client's first call. The first response to
    arrive is returned; a request whose repeat is not harmless needs a check of its own
    (Lifecycle.transition)."""
    return _call(probe, client, request, node, timeout)[0]


def _call(probe, client, request, node, timeout: float):
    """(the first response, how many times the request was sent)."""
    deadline = time.monotonic() + timeout
    assert client.wait_for_service(timeout_sec=timeout), client.srv_name
    return _resend(probe, lambda: client.call_async(request), node, deadline, client.srv_name)


def results(probe, handles, node, timeout: float = 60.0) -> list:
    """Each accepted Ask goal's GetResult response, in order, asked for again while
    unanswered (a result response can be lost as `call` describes): the server keeps a
    finished goal's result (result_timeout), so asking twice is harmless."""
    return [_resend(probe, handle.get_result_async, node, time.monotonic() + timeout,
                    "the Ask result service")[0] for handle in handles]


def _resend(probe, send, node, deadline: float, what: str):
    """(the first answer to send()'s request, how many times it was sent): sent again
    every RESEND_S while unanswered, until the deadline."""
    futures = []

    def answered():
        return any(future.done() for future in futures)

    while time.monotonic() < deadline:
        futures.append(send())
        if probe.spin(min(RESEND_S, deadline - time.monotonic()), until=answered):
            return next(f for f in futures if f.done()).result(), len(futures)
    raise AssertionError(f"{what} did not answer {len(futures)} requests by the deadline "
                         f"(node running: {node.poll() is None}):\n"
                         + "".join(node.lines)[-3000:])


class Lifecycle:
    """The inference node's lifecycle services, as the probe calls them."""

    def __init__(self, probe, node, name: str = "/inference"):
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState, GetState
        self.targets = {Transition.TRANSITION_CONFIGURE: "inactive",
                        Transition.TRANSITION_CLEANUP: "unconfigured",
                        Transition.TRANSITION_ACTIVATE: "active",
                        Transition.TRANSITION_DEACTIVATE: "inactive"}
        self.probe, self.node = probe, node
        self.change = probe.node.create_client(ChangeState, f"{name}/change_state")
        self.get = probe.node.create_client(GetState, f"{name}/get_state")

    def state(self, timeout: float = 30.0) -> str:
        from lifecycle_msgs.srv import GetState
        return call(self.probe, self.get, GetState.Request(), self.node,
                    timeout).current_state.label

    def transition(self, transition_id: int, timeout: float = 60.0) -> bool:
        """Whether the transition was made. A resent request finds it made when the first
        one's response was lost: then the node's state, not that answer, says."""
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState
        request = ChangeState.Request(transition=Transition(id=transition_id))
        response, sends = _call(self.probe, self.change, request, self.node, timeout)
        return response.success or (sends > 1 and self.state() == self.targets[transition_id])
