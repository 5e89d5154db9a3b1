"""synthetic_camera node: publishes tabletop worlds (demo/world.py) as camera images and
the expert's joint states, a new world every episode_s seconds (a topic ending in
/compressed gets JPEG CompressedImage, any other raw rgb8 Image)."""

import sys

import cv2
from rclpy.node import Node
from sensor_msgs.msg import CompressedImage, Image, JointState

from oxygen_ros.ros import qos
from oxygen_ros.ros.image_conversion import rgb_to_image
from oxygen_ros.ros.run_node import run_node
from oxygen_ros.demo.world import TabletopWorld


class SyntheticCamera(Node):
    """Publishes every camera's frame and a joint state with one shared stamp per tick."""

    def __init__(self, **kwargs):
        super().__init__("synthetic_camera", **kwargs)
        self.declare_parameter("camera_topics", ["/cameras/base/image_raw",
                                                 "/cameras/left_wrist/image_raw",
                                                 "/cameras/right_wrist/image_raw"])
        self.declare_parameter("joint_state_topic", "/joint_states")
        self.declare_parameter("rate_hz", 15.0)
        self.declare_parameter("width", 320)
        self.declare_parameter("height", 240)
        self.declare_parameter("seed", 0)
        self.declare_parameter("episode_s", 12.0)
        topics = self.get_parameter("camera_topics").value
        self.size = (self.get_parameter("height").value, self.get_parameter("width").value)
        self.seed = self.get_parameter("seed").value
        self.episode_s = self.get_parameter("episode_s").value
        self.world = TabletopWorld(self.seed)
        self.compressed = [t.rstrip("/").endswith("/compressed") for t in topics]
        self.image_pubs = [self.create_publisher(CompressedImage if c else Image, t, qos.SENSOR)
                           for t, c in zip(topics, self.compressed)]
        self.state_pub = self.create_publisher(
            JointState, self.get_parameter("joint_state_topic").value, qos.SENSOR)
        self.start = self.get_clock().now()
        self.frames = 0
        self.create_timer(1.0 / self.get_parameter("rate_hz").value, self.tick)

    def tick(self) -> None:
        now = self.get_clock().now()
        episode, t = divmod((now - self.start).nanoseconds / 1e9, self.episode_s)
        if self.world.seed != self.seed + int(episode):
            self.world = TabletopWorld(self.seed + int(episode))
        stamp = now.to_msg()
        for camera, (publisher, compressed) in enumerate(zip(self.image_pubs, self.compressed)):
            frame = self.world.frame(camera % 3, t, *self.size)
            if compressed:
                jpeg = cv2.imencode(".jpg", cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))[1]
                msg = CompressedImage(format="jpeg", data=jpeg.tobytes())
                msg.header.stamp, msg.header.frame_id = stamp, f"camera_{camera}"
            else:
                msg = rgb_to_image(frame, Image, stamp, f"camera_{camera}")
            publisher.publish(msg)
        state = JointState(name=self.world.joint_names,
                           position=self.world.joint_positions(t).tolist())
        state.header.stamp = stamp
        self.state_pub.publish(state)
        self.frames += 1


def main(args=None) -> int:
    return run_node(SyntheticCamera, args)


if __name__ == "__main__":
    sys.exit(main())
