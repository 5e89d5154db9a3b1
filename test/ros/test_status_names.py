"""Each robot's DiagnosticStatus names the robot, so two robots' statuses on one
/diagnostics never share a name: a fleet server's ports by their robot, a namespaced
robot's own nodes (`namespace:=alpha`, inference local or remote) by their namespace."""

from rclpy.node import Node

from oxygen_ros.ros.camera_ingest import CameraIngest
from oxygen_ros.ros.robot_port import RobotPort


def test_statuses_are_named_by_robot(rclpy_context):
    plain = Node("inference", context=rclpy_context)
    alpha = Node("inference", namespace="alpha", context=rclpy_context)
    server = Node("fleet", namespace="edge", context=rclpy_context)
    ingest = CameraIngest(namespace="alpha", context=rclpy_context)
    try:
        assert RobotPort(plain, "").status_name == "oxygen_ros: inference"
        assert RobotPort(alpha, "").status_name == "oxygen_ros: inference/alpha"
        assert RobotPort(server, "beta").status_name == "oxygen_ros: inference/beta"
        assert ingest.status_name == "oxygen_ros: camera_ingest/alpha"
    finally:
        for node in (plain, alpha, server, ingest):
            node.destroy_node()
