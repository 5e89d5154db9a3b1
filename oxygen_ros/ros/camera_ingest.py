"""camera_ingest node: N camera topics + joint_states -> synchronized, resized Observation."""

import sys

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import String

from oxygen_ros.msg import Observation
from oxygen_ros.ros import diagnostics, qos
from oxygen_ros.ros.frame_sync import FrameSynchronizer
from oxygen_ros.ros.image_conversion import (
    ImageConversionError,
    compressed_to_rgb,
    image_to_rgb,
    resize_rgb,
    rgb_to_image,
)
from oxygen_ros.ros.run_node import run_node

NS = 1_000_000_000


def stamp_ns(stamp) -> int:
    return stamp.sec * NS + stamp.nanosec


class CameraIngest(Node):
    """Thin adapter: converts and pairs sensor messages, publishes Observation at camera rate.

    A camera topic ending in `/compressed` is read as sensor_msgs/CompressedImage (the
    image_transport convention); any other as sensor_msgs/Image.
    """

    def __init__(self, **kwargs):
        super().__init__("camera_ingest", **kwargs)
        self.declare_parameter("camera_topics", ["/cameras/base/image_raw",
                                                 "/cameras/left_wrist/image_raw",
                                                 "/cameras/right_wrist/image_raw"])
        self.declare_parameter("camera_names", ["base", "left_wrist", "right_wrist"])
        self.declare_parameter("joint_state_topic", "/joint_states")
        self.declare_parameter("instruction_topic", "/oxygen/instruction")
        self.declare_parameter("observation_topic", "/oxygen/observation")
        self.declare_parameter("image_size", 224)
        self.declare_parameter("resize_mode", "pad")
        self.declare_parameter("sync_slop_s", 0.025)
        self.declare_parameter("max_delay_s", 0.1)
        self.declare_parameter("max_age_s", 1.0)
        self.declare_parameter("diagnostics_period_s", 1.0)

        topics = self._param("camera_topics")
        names = self._param("camera_names")
        if len(topics) != len(names) or not topics:
            raise ValueError(f"camera_topics ({len(topics)}) and camera_names ({len(names)}) "
                             "must be non-empty and of equal length")
        self.image_size = self._param("image_size")
        self.resize_mode = self._param("resize_mode")
        if self.resize_mode not in ("pad", "stretch"):
            raise ValueError(f"resize_mode must be 'pad' or 'stretch', not {self.resize_mode!r}")
        self.max_age_ns = int(self._param("max_age_s") * NS)
        self.sync = FrameSynchronizer(names, slop_ns=int(self._param("sync_slop_s") * NS),
                                      max_delay_ns=int(self._param("max_delay_s") * NS))
        self.counters = {"conversion_errors": 0, "stale": 0, "future": 0}
        self.instruction = ""
        self._reported_problems = 0
        self.problems = diagnostics.BurstLogger(self.get_logger())

        self.publisher = self.create_publisher(Observation, self._param("observation_topic"),
                                               qos.RELIABLE)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.RELIABLE)
        for topic, name in zip(topics, names):
            compressed = topic.rstrip("/").endswith("/compressed")
            self.create_subscription(
                CompressedImage if compressed else Image, topic,
                lambda msg, name=name, compressed=compressed: self.on_image(name, msg, compressed),
                qos.SENSOR)
        self.create_subscription(JointState, self._param("joint_state_topic"), self.on_joint_state,
                                 qos.SENSOR)
        self.create_subscription(String, self._param("instruction_topic"), self.on_instruction,
                                 qos.LATCHED)
        self.create_timer(self._param("diagnostics_period_s"), self.publish_diagnostics)
        self.get_logger().info(f"cameras {dict(zip(names, topics))} -> "
                               f"{self._param('observation_topic')} at {self.image_size}px")

    def _param(self, name):
        return self.get_parameter(name).value

    def on_image(self, camera: str, msg, compressed: bool) -> None:
        stamp = stamp_ns(msg.header.stamp)
        if not self._fresh(stamp):
            return
        try:
            rgb = compressed_to_rgb(msg) if compressed else image_to_rgb(msg)
        except ImageConversionError as error:
            self.counters["conversion_errors"] += 1
            self.problems.warn(error.kind, f"camera {camera}: {error}")
            return
        self.sync.add_frame(camera, stamp, resize_rgb(rgb, self.image_size, self.resize_mode))
        self._publish_ready()

    def on_joint_state(self, msg: JointState) -> None:
        stamp = stamp_ns(msg.header.stamp)
        if self._fresh(stamp):
            self.sync.add_state(stamp, msg)
            self._publish_ready()

    def on_instruction(self, msg: String) -> None:
        self.instruction = msg.data
        self.get_logger().info(f"instruction: {msg.data[:120]!r}")

    def _fresh(self, stamp: int) -> bool:
        now = self.get_clock().now().nanoseconds
        if stamp < now - self.max_age_ns:
            self.counters["stale"] += 1
            self.problems.warn("stale", "dropping sensor messages older than max_age_s")
            return False
        if stamp > now + self.max_age_ns:
            self.counters["future"] += 1
            self.problems.warn("future", "dropping sensor messages stamped in the future")
            return False
        return True

    def _publish_ready(self) -> None:
        while (synced := self.sync.pop()) is not None:
            msg = Observation(camera_names=list(synced.frames), state=synced.state,
                              instruction=self.instruction)
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(synced.stamp_ns, NS)
            msg.images = [rgb_to_image(image, Image, msg.header.stamp, name)
                          for name, image in synced.frames.items()]
            self.publisher.publish(msg)

    def publish_diagnostics(self) -> None:
        stats = vars(self.sync.stats) | self.counters
        problems = stats["stale"] + stats["future"] + stats["conversion_errors"]
        new_problems, self._reported_problems = problems - self._reported_problems, problems
        level = diagnostics.WARN if new_problems else diagnostics.OK
        self.diagnostics_pub.publish(diagnostics.array(
            self.get_clock().now().to_msg(),
            diagnostics.status("oxygen_ros: camera_ingest", self.get_name(), level,
                               f"dropped {new_problems} bad inputs" if new_problems else "ok",
                               stats)))


def main(args=None) -> int:
    return run_node(CameraIngest, args)


if __name__ == "__main__":
    sys.exit(main())
