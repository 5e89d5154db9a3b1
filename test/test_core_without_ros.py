"""The core (model/, cache/, engine/, the benchmarks but bench-ingest, and the bench CLI
verbs) runs where ROS is absent: with every ROS module made unimportable, it imports and
runs a frame."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PROBE = r'''
import importlib, pkgutil, sys

ROS = ("rclpy", "rcl_interfaces", "rosidl_runtime_py", "rosidl_parser", "ament_index_python",
       "std_msgs", "sensor_msgs", "builtin_interfaces", "diagnostic_msgs", "trajectory_msgs",
       "action_msgs", "lifecycle_msgs", "rosgraph_msgs", "unique_identifier_msgs", "cv_bridge",
       "rosbags", "oxygen_ros.msg", "oxygen_ros.action", "oxygen_ros.ros")


class NoRos:
    def find_spec(self, name, path=None, target=None):
        if any(name == r or name.startswith(r + ".") for r in ROS):
            raise ModuleNotFoundError(f"{name} is ROS: not on the core path")


sys.meta_path.insert(0, NoRos())
import oxygen_ros
for package in ("oxygen_ros.model", "oxygen_ros.cache", "oxygen_ros.engine", "oxygen_ros.demo"):
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        importlib.import_module(info.name)
for name in ("oxygen_ros.bench.engine", "oxygen_ros.bench.model", "oxygen_ros.bench.switch"):
    importlib.import_module(name)

import numpy as np
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.observation import Observation
from oxygen_ros.engine.oxygen import OxygenEngine
from oxygen_ros.model.config import preset
from oxygen_ros.model.pi05 import Pi05Model

engine = OxygenEngine(Pi05Model(preset("tiny")).eval(),
                      EngineConfig(camera_names=("base", "left_wrist"), num_pages=64))
engine.submit_dialogue("hello")
images = {c: np.zeros((28, 28, 3), np.uint8) for c in ("base", "left_wrist")}
report = engine.step(Observation(images, np.zeros(6), "pick", 0.0))
assert report.chunk.actions.shape == (4, 6) and report.tokens >= 1

from oxygen_ros import cli
assert cli.main(["bench-model", "--preset", "tiny", "--repeats", "1", "--batches", "1"]) == 0
assert cli.main(["bench", "--preset", "tiny", "--frames", "2", "--cameras", "2"]) == 0
leaked = sorted(m for m in sys.modules if any(m == r or m.startswith(r + ".") for r in ROS))
assert not leaked, leaked
print("core without ROS: ok")
'''


def test_the_core_and_its_benchmarks_run_with_every_ros_module_unimportable():
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "core without ROS: ok" in result.stdout
