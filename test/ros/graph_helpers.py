"""Helpers for graph tests: parameter files for a tiny-preset graph and a probe node that
records what the inference node publishes (written independently of ros/monitor.py)."""

import sys
import time
from pathlib import Path

import yaml

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

        from oxygen_ros.ros import qos

        # a robot's topics are under /<robot>/ (written out here, not robot_port's helper)
        topic = (lambda name: f"/{robot}{name}") if robot else (lambda name: name)
        self.node = Node(f"probe_{robot}" if robot else "probe", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.commands, self.chunks, self.dialogue, self.memory = [], [], [], []
        self.observations, self.diagnostics, self.reports = [], {}, []
        self.by_reporter = {}     # (status name, hardware id) -> (level, message), newest
        sub = self.node.create_subscription
        sub(Float64MultiArray, topic("/oxygen/joint_command"),
            lambda m: self.commands.append((time.monotonic(), list(m.data))), qos.COMMAND)
        sub(ActionChunk, topic("/oxygen/action_chunk"), self.chunks.append, qos.RELIABLE)
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
            self.reports.append((time.monotonic(), status.name, values))

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

    def reports_of(self, node: str, since: float = 0.0, until: float = float("inf")) -> list:
        """The values of every report `node` published that arrived between since and until."""
        return [values for t, name, values in self.reports
                if name == f"oxygen_ros: {node}" and since < t <= until]

    def command_rate(self, window_s: float) -> float:
        times = [t for t, _ in self.commands if t >= self.commands[-1][0] - window_s]
        return (len(times) - 1) / (times[-1] - times[0])

    def close(self):
        self.executor.remove_node(self.node)
        self.node.destroy_node()
