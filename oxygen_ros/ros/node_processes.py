"""camera_ingest and inference each in its own process, as the launch file runs them (a
fleet: each robot's camera_ingest in its namespace, as fleet.launch.py does): start them,
wait until a signal, a duration or one of them ends, stop them with hard timeouts (rclpy
traps SIGTERM: SIGINT first, SIGKILL after a deadline)."""

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional, Sequence

from oxygen_ros.ros import launch_plan

NODES = (("camera_ingest", "camera_ingest"), ("inference", "inference_node"))
STOP_GRACE_S = 10.0       # a node joins its engine thread and leaves in a few seconds


def node_command(executable: str, module: str) -> list[str]:
    """A node's installed executable (it leaves quietly on Ctrl-C even while importing),
    else its module."""
    installed = Path(sys.prefix) / "lib" / "oxygen_ros" / executable
    return [str(installed)] if installed.exists() else [sys.executable, "-m",
                                                        f"oxygen_ros.ros.{module}"]


def start_nodes(ros_args: list[str]) -> list[subprocess.Popen]:
    """Both nodes, each given the same --ros-args (a params file and -p overrides)."""
    return [subprocess.Popen(node_command(executable, module) + ros_args)
            for executable, module in NODES]


def stop_children(children, grace_s: float = STOP_GRACE_S) -> None:
    """SIGINT to every child still running, SIGKILL to those alive `grace_s` later."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
    deadline = time.monotonic() + grace_s
    for child in children:
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def supervise(children, stop: threading.Event, duration: float = 0.0,
              grace_s: float = STOP_GRACE_S, names: Sequence[str] = ()) -> int:
    """Wait until `stop` is set, `duration` seconds pass (0: no limit) or a child ends (as
    the launch file, which then shuts everything down); stop every child. 0, or the exit
    code of the child that ended on its own (128 + N for signal N, as a shell says), or of
    one that failed as it was stopped (a configure that failed after the duration ran out).
    With `names` (one per child), a child that ended on its own or failed is named on
    stderr."""
    deadline = time.monotonic() + duration if duration else float("inf")
    ended = None
    while not stop.is_set() and time.monotonic() < deadline:
        ended = next((child for child in children if child.poll() is not None), None)
        if ended is not None:
            break
        stop.wait(0.1)
    if ended is not None and names:
        how = (f"exited with code {ended.returncode}" if ended.returncode >= 0
               else f"was killed by signal {-ended.returncode}")
        print(f"{names[children.index(ended)]} (pid {ended.pid}) {how}; stopping the others",
              file=sys.stderr, flush=True)
    stop_children(children, grace_s)
    if ended is None or ended.returncode == 0:   # another may have failed as it stopped
        failed = next((child for child in children if child.returncode > 0), None)
        if failed is not None and names:
            print(f"{names[children.index(failed)]} (pid {failed.pid}) failed as it was "
                  f"stopped, with code {failed.returncode}", file=sys.stderr, flush=True)
        ended = failed or ended
        if ended is None:
            return 0
    return _shell_code(ended.returncode)


def _shell_code(returncode: int) -> int:
    return returncode if returncode >= 0 else 128 - returncode


def start_ingests(ros_args: list, robots: list[str], directory: Path, output=None,
                  given: Optional[dict] = None) -> list:
    """Each robot's camera_ingest under /<robot> with its topics there (as `humanoid.launch.py
    namespace:=<robot> inference:=remote` runs it), given one YAML: the run's, with the topics
    set and its section moved to its full name, the run's -p camera_ingest values (`given`)
    winning over a robot's own section (the run's other -p are the inference node's)."""
    config = run_config(ros_args)
    ingests = []
    for robot in robots:
        robot_yaml = directory / f"{robot}_camera_ingest.yaml"
        robot_yaml.write_text(launch_plan.namespaced_ingest(config, robot, given or {}))
        ingests.append(subprocess.Popen(
            node_command("camera_ingest", "camera_ingest")
            + ["--ros-args", "--params-file", str(robot_yaml), "-r", f"__ns:=/{robot}"],
            stdout=output, stderr=output))
    return ingests


def run_config(ros_args: list) -> Path:
    """The YAML the nodes read: the --params-file in `ros_args`, else the installed default."""
    params = params_file(ros_args)
    return Path(params) if params else launch_plan.config_file({}, _config_dir())


def params_file(ros_args: list) -> Optional[str]:
    """The --params-file in `ros_args`, if any."""
    return next((ros_args[i + 1] for i, arg in enumerate(ros_args[:-1])
                 if arg == "--params-file"), None)


def _config_dir() -> Path:
    from oxygen_ros.resources import share_path
    return share_path("config")
