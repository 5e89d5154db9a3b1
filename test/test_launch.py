"""The launch file builds a LaunchDescription that starts both nodes from the package."""

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

launch_ros = pytest.importorskip(
    "launch_ros", reason="launch_ros is not installable from pip; this test runs on a ROS 2 install")


def test_humanoid_launch_starts_ingest_and_inference_with_the_config():
    from launch.actions import DeclareLaunchArgument
    from launch_ros.actions import Node

    from launch import LaunchDescription

    spec = importlib.util.spec_from_file_location("humanoid_launch",
                                                  REPO / "launch" / "humanoid.launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    assert isinstance(description, LaunchDescription)
    arguments = {e.name for e in description.entities if isinstance(e, DeclareLaunchArgument)}
    assert {"config_file", "preset", "checkpoint", "tokenizer", "dry_run", "use_sim_time",
            "joint_states_topic",
            "command_topic", "trajectory_topic"} <= arguments
    nodes = [e for e in description.entities if isinstance(e, Node)]
    assert sorted(n.node_executable for n in nodes) == ["camera_ingest", "inference"]
    assert all(n.node_package == "oxygen_ros" for n in nodes)
