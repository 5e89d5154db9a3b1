"""The nodes' plain logic and parameters import where ROS is absent (no rclpy, no messages)."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODULES = ("oxygen_ros.engine.parameters", "oxygen_ros.ros.node_parameters",
           "oxygen_ros.ros.command_gate", "oxygen_ros.ros.inference_health",
           "oxygen_ros.ros.parameter_docs", "oxygen_ros.ros.control_loop",
           "oxygen_ros.ros.control_link", "oxygen_ros.ros.robot_topics",
           "oxygen_ros.ros.launch_plan", "oxygen_ros.ros.joint_state_merger",
           "oxygen_ros.ros.engine_session", "oxygen_ros.ros.config_check",
           "oxygen_ros.ros.topic_names")

PROBE = r'''
import importlib, sys

ROS = ("rclpy", "rcl_interfaces", "std_msgs", "sensor_msgs", "diagnostic_msgs",
       "trajectory_msgs", "oxygen_ros.msg", "oxygen_ros.action")


class NoRos:
    def find_spec(self, name, path=None, target=None):
        if any(name == r or name.startswith(r + ".") for r in ROS):
            raise ModuleNotFoundError(f"{name} is ROS")


sys.meta_path.insert(0, NoRos())
for name in sys.argv[1:]:
    importlib.import_module(name)
'''


def test_they_import_without_ros():
    result = subprocess.run([sys.executable, "-c", PROBE, *MODULES], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
