"""camera_ingest node: N camera topics + joint_states -> synchronized, resized Observation.

Every callback is a boundary: whatever a message holds, it is converted or counted under
its own kind (and logged once per burst); an unexpected exception is counted as
internal_error with one throttled traceback, and the node goes on."""

import math
import sys
import threading
import time
from collections import Counter

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.event_handler import SubscriptionEventCallbacks, UnsupportedEventTypeError
from rclpy.node import Node
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import String

from oxygen_ros.msg import Observation
from oxygen_ros.ros import diagnostics, qos, ros_parameters
from oxygen_ros.ros.conversions import (future_stamp_text, joint_state_problem,
                                        stale_stamp_text, take_instruction)
from oxygen_ros.ros.config_check import check_topics
from oxygen_ros.ros.diagnostics import guarded
from oxygen_ros.ros.executor import YieldingMultiThreadedExecutor
from oxygen_ros.ros.frame_sync import FrameSynchronizer
from oxygen_ros.model.letterbox import resize_rgb
from oxygen_ros.ros.image_conversion import (
    ImageConversionError,
    compressed_to_rgb,
    image_to_rgb,
    rgb_to_image,
)
from oxygen_ros.ros.joint_state_merger import JointStateMerger
from oxygen_ros.ros.node_parameters import ingest_parameters, ingest_specs
from oxygen_ros.ros.run_node import run_node
from oxygen_ros.ros.stamps import stamp_ns

SILENT_S = 2.0                 # a camera topic without frames this long is reported
LOST_HINT = ("DDS dropped them before this node, most often raw frames too large for its "
             "transport: give the camera driver and this node a shared-memory profile, or "
             "subscribe to the compressed topic (docs/hd-cameras.md)")
IMAGE_PROBLEMS = ("unsupported_encoding", "wrong_size", "undecodable", "empty_image",
                  "too_large", "degenerate_aspect", "tiny_image")

NS = 1_000_000_000


class CameraIngest(Node):
    """Thin adapter: converts and pairs sensor messages, publishes Observation at camera rate.

    A camera topic ending in `/compressed` is read as sensor_msgs/CompressedImage (the
    image_transport convention); any other as sensor_msgs/Image. Cameras decode in
    parallel (OpenCV releases the interpreter); joint states have their own callback group
    and a deep queue, so a busy camera never makes them overflow. Joint states published in
    parts (an arm and a gripper driver) are merged (JointStateMerger).
    """

    def __init__(self, **kwargs):
        super().__init__("camera_ingest", **kwargs)
        ros_parameters.declare(self, ingest_specs(), " (read at start)", read_only=True)
        ros_parameters.freeze_clock(self, lambda: "camera_ingest reads use_sim_time at start: "
                                    "start it again with the new value")
        values = ros_parameters.values(self, ingest_specs())
        params = ingest_parameters(values)
        check_topics("camera_ingest", values, self.get_fully_qualified_name())
        topics, names = params.camera_topics, params.camera_names
        self.image_size, self.resize_mode = params.image_size, params.resize_mode
        self.max_pixels = params.max_image_pixels
        self.use_tiny_images = params.tiny_images == "use"
        self.max_age_ns = int(params.max_age_s * NS)
        slop_ns, max_delay_ns = int(params.sync_slop_s * NS), int(params.max_delay_s * NS)
        # a frame reaches the synchronizer at most max_age_s old (checked again after its
        # decode) and waits at most max_delay_s there: no frame needs an older joint state
        self.sync = FrameSynchronizer(list(names), slop_ns=slop_ns, max_delay_ns=max_delay_ns,
                                      state_horizon_ns=self.max_age_ns + max_delay_ns + slop_ns)
        self.joints = JointStateMerger(self.max_age_ns)
        self._sync_lock = threading.Lock()
        self._frames = dict.fromkeys(names, 0)     # messages received, each camera's thread
        self._count_lock = threading.Lock()        # kinds counted on several threads
        self.counters = dict.fromkeys(("conversion_errors", "stale", "future") + IMAGE_PROBLEMS
                                      + ("lost_frames", "lost_joint_states")
                                      + ("joint_state_mismatch", "non_finite_joint_state",
                                         "empty_instruction", "long_instruction",
                                         "internal_error"), 0)
        self.instruction = ""
        self.camera_topics = dict(zip(names, topics))
        self.joint_state_topic = params.joint_state_topic
        self._last_frame = dict.fromkeys(names, float("-inf"))   # monotonic receipt
        self._reported_problems: Counter = Counter()
        self.problems = diagnostics.BurstLogger(self.get_logger())

        self.publisher = self.create_publisher(Observation, params.observation_topic,
                                               qos.RELIABLE)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.RELIABLE)
        on_image = guarded(self, self.on_image)
        for topic, name in zip(topics, names):
            compressed = topic.rstrip("/").endswith("/compressed")
            self._subscribe_counting_losses(
                CompressedImage if compressed else Image, topic,
                lambda msg, name=name, compressed=compressed: on_image(name, msg, compressed),
                qos.SENSOR, "lost_frames")
        self._subscribe_counting_losses(JointState, params.joint_state_topic,
                                        guarded(self, self.on_joint_state), qos.SENSOR_DEEP,
                                        "lost_joint_states")
        self.create_subscription(String, params.instruction_topic,
                                 guarded(self, self.on_instruction), qos.LATCHED)
        diagnostics.steady_timer(self, params.diagnostics_period_s,
                                 guarded(self, self.publish_diagnostics))
        self.get_logger().info(f"cameras {dict(zip(names, topics))} -> "
                               f"{params.observation_topic} at {self.image_size}px")

    def _count(self, kind: str, count: int = 1) -> None:
        with self._count_lock:
            self.counters[kind] += count

    def _problem(self, kind: str, detail: str, source: str = "", count: int = 1) -> None:
        self._count(kind, count)
        self.problems.warn(kind, detail, source)

    def _subscribe_counting_losses(self, msg_type, topic: str, callback, profile,
                                   lost: str) -> None:
        """A best-effort sensor subscription in a callback group of its own, whose messages
        DDS reports lost before they reached this node (a sequence gap) are counted under
        `lost` (an RMW that cannot tell: not counted)."""
        def on_lost(info) -> None:
            why = LOST_HINT if lost == "lost_frames" else "DDS dropped them before this node"
            self._problem(lost, f"{topic}: {info.total_count_change} messages lost in "
                                f"transport ({info.total_count} so far): {why}", topic,
                          info.total_count_change)

        group = MutuallyExclusiveCallbackGroup()
        events = SubscriptionEventCallbacks(message_lost=guarded(self, on_lost))
        try:
            self.create_subscription(msg_type, topic, callback, profile, callback_group=group,
                                     event_callbacks=events)
        except UnsupportedEventTypeError:
            self.create_subscription(msg_type, topic, callback, profile, callback_group=group)

    def on_image(self, camera: str, msg, compressed: bool) -> None:
        self._last_frame[camera] = time.monotonic()
        self._frames[camera] += 1
        stamp = stamp_ns(msg.header.stamp)
        if not self._fresh(stamp, self.camera_topics[camera]):
            return
        try:
            if compressed:
                rgb = compressed_to_rgb(msg, self.image_size, self.resize_mode, self.max_pixels)
            else:
                rgb = image_to_rgb(msg, self.max_pixels)
        except ImageConversionError as error:
            self._count("conversion_errors")
            return self._problem(error.kind, f"camera {camera}: {error}", camera)
        if max(rgb.shape[:2]) * 4 < self.image_size:
            self._count("tiny_image")
            self.problems.warn("tiny_image", f"camera {camera}: {rgb.shape[1]}x{rgb.shape[0]} "
                               f"for a {self.image_size} px model "
                               f"({'used' if self.use_tiny_images else 'dropped'})", camera)
            if not self.use_tiny_images:
                return
        frame = resize_rgb(rgb, self.image_size, self.resize_mode)
        # checked again: its decode may have taken it past max_age_s
        if not self._fresh(stamp, self.camera_topics[camera]):
            return
        with self._sync_lock:
            self.sync.add_frame(camera, stamp, frame)
            self._publish_ready()

    def on_joint_state(self, msg: JointState) -> None:
        stamp = stamp_ns(msg.header.stamp)
        if not self._fresh(stamp, self.joint_state_topic):
            return
        problem = joint_state_problem(msg)
        if problem:
            detail = ("not finite: " + ", ".join(repr(name) for name, position
                                                 in zip(msg.name, msg.position)
                                                 if not math.isfinite(position))
                      if problem == "non_finite_joint_state"
                      else f"{len(msg.name)} names, {len(msg.position)} positions")
            return self._problem(problem, f"{self.joint_state_topic}: {detail} (dropped)")
        with self._sync_lock:
            names, positions = self.joints.merge(stamp, msg.name, msg.position)
            self.sync.add_state(stamp, JointState(header=msg.header, name=names,
                                                  position=positions))
            self._publish_ready()

    def on_instruction(self, msg: String) -> None:
        self.instruction = take_instruction(msg.data, self.instruction, self._problem,
                                            self.get_logger())

    def _fresh(self, stamp: int, topic: str) -> bool:
        now = self.get_clock().now().nanoseconds
        if stamp < now - self.max_age_ns:
            text = stale_stamp_text((now - stamp) / NS, stamp,
                                    self.get_parameter("use_sim_time").value)
            self._problem("stale", f"{topic}: {text} (over max_age_s "
                                   f"{self.max_age_ns / NS:g}: dropped)", topic)
            return False
        if stamp > now + self.max_age_ns:
            text = future_stamp_text((stamp - now) / NS, now,
                                     self.get_parameter("use_sim_time").value)
            self._problem("future", f"{topic}: {text}, over max_age_s "
                                    f"{self.max_age_ns / NS:g} (dropped)", topic)
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
        stats = vars(self.sync.stats) | {"frames": sum(self._frames.values())} | self.counters
        problems = Counter({key: n for key, n in self.counters.items()
                            if key != "conversion_errors"})    # the image kinds' total
        new_problems, self._reported_problems = problems - self._reported_problems, problems
        now = time.monotonic()
        silent = [self.camera_topics[name] for name, last in self._last_frame.items()
                  if now - last > SILENT_S]
        stats["silent_cameras"] = len(silent)
        if silent:
            level, message = diagnostics.WARN, (f"no frames for {SILENT_S:g} s on "
                                                f"{', '.join(silent)}")
        elif new_problems:
            level, message = diagnostics.WARN, ", ".join(
                f"{n} {kind}" for kind, n in sorted(new_problems.items()))
        else:
            level, message = diagnostics.OK, "ok"
        self.diagnostics_pub.publish(diagnostics.array(
            self.get_clock().now().to_msg(),
            diagnostics.status(self.status_name, self.get_name(), level,
                               message, stats)))

    @property
    def status_name(self) -> str:
        """`oxygen_ros: camera_ingest`, and `/<robot>` after it for a robot's namespaced
        node, as the inference server names its robots' statuses."""
        namespace = self.get_namespace().strip("/")
        return "oxygen_ros: camera_ingest" + (f"/{namespace}" if namespace else "")


def main(args=None) -> int:
    return run_node(CameraIngest, args,
                    make_executor=lambda: YieldingMultiThreadedExecutor(num_threads=3))


if __name__ == "__main__":
    sys.exit(main())
