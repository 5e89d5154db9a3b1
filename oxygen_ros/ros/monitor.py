"""OutputMonitor node: subscribes to everything the inference node publishes for one robot
and keeps rates and counts (the demo prints them; it is also a handy probe on a robot)."""

import time
from collections import deque

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray

from oxygen_ros.msg import ActionChunk, DialogueChunk, MemorySummary
from oxygen_ros.ros import qos
from oxygen_ros.ros.stamps import to_seconds
from oxygen_ros.ros.robot_topics import robot_topic


class OutputMonitor(Node):
    """robot: a fleet server's robot (its topics under /<robot>/, its status
    `oxygen_ros: inference/<robot>`); "" for a single robot."""

    def __init__(self, robot: str = "", **kwargs):
        super().__init__(f"oxygen_monitor_{robot}" if robot else "oxygen_monitor", **kwargs)
        self.robot = robot
        self.status_name = "oxygen_ros: inference" + (f"/{robot}" if robot else "")
        self.command_times: deque = deque(maxlen=2000)
        self.commands: deque = deque(maxlen=4000)       # (wall time, values)
        self.chunks = 0
        self.dialogue: dict[int, list[str]] = {}
        self.finished_dialogue: list[tuple[int, str]] = []
        self.finish_reasons: dict[int, str] = {}      # request id -> why its answer ended
        self.dialogue_stamps: dict[int, float] = {}   # request id -> the observation it reads
        self.missing_cameras: dict[int, list[str]] = {}   # request id -> cameras it lacked
        self.summaries: list[str] = []
        self.diagnostics: dict[str, dict[str, str]] = {}
        topic = lambda name: robot_topic(robot, name)  # noqa: E731
        self.create_subscription(Float64MultiArray, topic("/oxygen/joint_command"),
                                 self._on_command, qos.COMMAND)
        self.create_subscription(ActionChunk, topic("/oxygen/action_chunk"), self._on_chunk,
                                 qos.RELIABLE)
        self.create_subscription(DialogueChunk, topic("/oxygen/dialogue"), self._on_dialogue,
                                 qos.RELIABLE_DEEP)
        self.create_subscription(MemorySummary, topic("/oxygen/memory"),
                                 lambda m: self.summaries.append(m.text), qos.RELIABLE)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics,
                                 qos.RELIABLE)

    def _on_command(self, msg) -> None:
        self.command_times.append(time.monotonic())
        self.commands.append((time.time(), list(msg.data)))

    def _on_chunk(self, _msg) -> None:
        self.chunks += 1

    def _on_dialogue(self, msg: DialogueChunk) -> None:
        self.dialogue.setdefault(msg.request_id, []).append(msg.text)
        if msg.header.stamp.sec or msg.header.stamp.nanosec:    # zero: it read none
            self.dialogue_stamps[msg.request_id] = to_seconds(msg.header.stamp)
        self.missing_cameras[msg.request_id] = list(msg.missing_cameras)
        if msg.final:
            self.finish_reasons[msg.request_id] = msg.finish_reason
            self.finished_dialogue.append((msg.request_id, "".join(self.dialogue[msg.request_id])))

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            self.diagnostics[status.name] = {v.key: v.value for v in status.values} | {
                "_message": status.message, "_level": str(status.level[0])}

    def command_rate(self, window_s: float = 2.0) -> float:
        now = time.monotonic()
        recent = [t for t in self.command_times if t > now - window_s]
        if len(recent) < 2:
            return 0.0
        return (len(recent) - 1) / (recent[-1] - recent[0])
