"""inference node: consumes Observation messages (the engine is attached in a later step)."""

import sys

from rclpy.node import Node

from oxygen_ros.msg import Observation
from oxygen_ros.ros import qos
from oxygen_ros.ros.image_conversion import image_to_rgb
from oxygen_ros.ros.run_node import run_node


class InferenceNode(Node):
    def __init__(self, **kwargs):
        super().__init__("inference", **kwargs)
        self.declare_parameter("observation_topic", "/oxygen/observation")
        self.observations = 0
        self.last_latency_ms = float("nan")
        self.last_shapes = []
        self.create_subscription(Observation, self.get_parameter("observation_topic").value,
                                 self.on_observation, qos.RELIABLE)

    def on_observation(self, msg: Observation) -> None:
        images = [image_to_rgb(image) for image in msg.images]
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.last_latency_ms = (self.get_clock().now().nanoseconds * 1e-9 - stamp) * 1e3
        self.last_shapes = [image.shape for image in images]
        self.observations += 1


def main(args=None) -> int:
    return run_node(InferenceNode, args)


if __name__ == "__main__":
    sys.exit(main())
