"""`colcon build` in a ROS 2 workspace generates the messages and installs everything."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE_FILES = ["CMakeLists.txt", "package.xml", "setup.py", "msg", "action", "launch",
                 "config", "models", "oxygen_ros", "cmake", "resource"]


def test_colcon_build_installs_messages_python_package_executables_launch_and_config(tmp_path):
    colcon = Path(sys.executable).with_name("colcon")
    source = tmp_path / "src" / "oxygen_ros"
    source.mkdir(parents=True)
    for name in PACKAGE_FILES:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
        copy(REPO / name, source / name)
    env = dict(os.environ, AMENT_PREFIX_PATH=sys.prefix, CMAKE_PREFIX_PATH=sys.prefix)
    build = subprocess.run(
        [str(colcon), "build", "--cmake-args", f"-DPython3_EXECUTABLE={sys.executable}",
         "-DBUILD_TESTING=OFF"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]

    install = tmp_path / "install" / "oxygen_ros"
    share = install / "share" / "oxygen_ros"
    assert (share / "launch" / "humanoid.launch.py").is_file()
    assert all((share / "config" / name).is_file()
               for name in ("humanoid.yaml", "humanoid_tiny.yaml", "humanoid_pi05.yaml",
                            "humanoid_demo.yaml"))
    assert (share / "models" / "demo" / "model.safetensors").stat().st_size == (
        REPO / "models" / "demo" / "model.safetensors").stat().st_size
    assert (install / "share" / "ament_index" / "resource_index" / "packages" / "oxygen_ros").exists()
    for executable in ("camera_ingest", "inference", "oxygen-ros"):
        path = install / "lib" / "oxygen_ros" / executable
        assert os.access(path, os.X_OK), path
    site = next((install / "lib").glob("python3*/site-packages"))
    # Import from the install space alone (not the checkout): messages and sources together.
    probe = subprocess.run(
        [sys.executable, "-c",
         "import oxygen_ros, oxygen_ros.ros.camera_ingest;"
         "from oxygen_ros.msg import Observation, ActionChunk, DialogueChunk, MemorySummary;"
         "from oxygen_ros.action import Ask;"
         "print(oxygen_ros.__file__)"],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(site), LD_LIBRARY_PATH=os.pathsep.join(
            [str(install / "lib"), os.environ.get("LD_LIBRARY_PATH", "")])),
        capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip().startswith(str(site))
