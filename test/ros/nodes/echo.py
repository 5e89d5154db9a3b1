"""Child process for the round-trip test: republishes every oxygen_ros message it receives."""

import rclpy
from oxygen_ros.msg import ActionChunk, DialogueChunk, MemorySummary, Observation
from rclpy.node import Node

from oxygen_ros.ros import qos

TYPES = {"observation": Observation, "action_chunk": ActionChunk,
         "dialogue_chunk": DialogueChunk, "memory_summary": MemorySummary}


def main() -> None:
    rclpy.init()
    node = Node("echo")
    for name, msg_type in TYPES.items():
        publisher = node.create_publisher(msg_type, f"/roundtrip/{name}/echo", qos.RELIABLE)
        node.create_subscription(msg_type, f"/roundtrip/{name}", publisher.publish, qos.RELIABLE)
    print("echo ready", flush=True)
    try:
        rclpy.spin(node)
    except KeyboardInterrupt:
        pass
    rclpy.try_shutdown()


if __name__ == "__main__":
    main()
