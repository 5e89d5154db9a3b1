"""camera_ingest and inference each in its own process, as the launch file runs them:
start them, wait until a signal, a duration or one of them ends, stop them with hard
timeouts (rclpy traps SIGTERM: SIGINT first, SIGKILL after a deadline)."""

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Sequence

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
