"""The command period holds while DDS participants join and leave the graph and look at the
inference node as the ros2 CLI does: node and topic lists, its parameters, a subscription
to its commands. (In the node's own process it did not: rclpy holds the interpreter lock
while a service response waits for DDS to match a new client, and commands had gaps of
60-640 ms whenever a `ros2` command joined. With shared memory in the control process's
participant, on Jazzy's Fast DDS 2.14 a publish waited 0.3-1.9 s for a joining
subscriber's shared-memory port: control_dds.py.)"""

import os
import signal
import time
from pathlib import Path

from graph_helpers import Probe, executable, write_params

PERIOD_S = 1 / 50.0
JOINERS, VISITS = 3, 4
LANE_EXIT_S = 60.0      # after its last verdict, a lane waits at most 21 s for that visit


def test_participants_joining_and_leaving_leave_the_command_period_alone(
        tmp_path, processes, rclpy_context):
    # what is measured is the control process's period. The node's own process can stall
    # while three joiners start beside it (0.82 s once in CI on Jazzy: the default 0.5 s
    # watchdog then stops the commands, as it should); a 3 s watchdog keeps that out of it
    params = write_params(tmp_path / "params.yaml",
                          inference={"memory_period_s": 0.0, "watchdog_ticks": 150})
    processes.start(executable("camera_ingest"), "--ros-args", "--params-file", params)
    inference = processes.start(executable("inference"), "--ros-args", "--params-file", params)
    processes.python("-m", "oxygen_ros.ros.synthetic_camera", "--ros-args",
                     "-p", "rate_hz:=30.0", "-p", "width:=64", "-p", "height:=48",
                     "-p", "camera_topics:=['/cameras/base/image_raw',"
                           "'/cameras/left_wrist/image_raw']")
    probe = Probe(rclpy_context)
    try:
        assert probe.spin(60.0, until=lambda: len(probe.commands) > 100), \
            "".join(inference.lines)[-2000:]
        start = time.time_ns()
        probe.report_after("inference", start)          # the counters of the running node
        trips = probe.counter("inference", "watchdog_trips")
        joiners = [processes.python("test/ros/nodes/joiner.py", processes.domain, VISITS,
                                    j * VISITS) for j in range(JOINERS)]
        # each visit's verdict comes before it leaves; then the lanes end, their last visits
        # gone (a visitor stuck in its own teardown is killed by its lane: joiner.py)
        def visited():
            return [line for j in joiners for line in j.lines if line.startswith("visit")]

        assert probe.spin(180.0, until=lambda: len(visited()) == JOINERS * VISITS), \
            where_joiners_hang(joiners)
        for joiner in joiners:
            processes.finish(joiner, timeout=LANE_EXIT_S)
        end = time.time_ns()
        visits = visited()
        assert len(visits) == JOINERS * VISITS and all(v.endswith("ok\n") for v in visits), \
            lanes_output(joiners)
        reports = probe.reports_stamped("inference", start + 1_000_000_000, end)
        assert len(reports) >= 3, probe.reports_of("inference")
        assert probe.counter("inference", "watchdog_trips") == trips, \
            "".join(inference.lines)[-2000:]
        # at most one tick late: under taskset -c 0 beside a CI run, with eight processes on
        # the core, one was (40.0 ms); the stalls this test is about cost 3 to 32 ticks
        gaps = [float(r["command_gap_ms_max"]) for r in reports]
        assert max(gaps) < 3 * PERIOD_S * 1e3, gaps
        assert min(float(r["action_rate_hz"]) for r in reports) >= 48.0, reports
        threads = control_process_threads(inference.pid)
        assert any(name.startswith("dds.") for name in threads), threads   # Fast DDS's
        assert not [name for name in threads if name.startswith("dds.shm")], threads
    finally:
        probe.close()


def where_joiners_hang(joiners) -> str:
    """Each joiner's last lines, with the Python stacks of those still running: the lane's
    and its visit's (both dump theirs on SIGUSR1)."""
    running = [j for j in joiners if j.poll() is None]
    printed = {j.pid: len(j.lines) for j in running}
    for joiner in running:
        os.killpg(joiner.pid, signal.SIGUSR1)
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not all(
            sum("most recent call first" in line for line in j.lines[printed[j.pid]:]) >= 2
            for j in running):
        time.sleep(0.1)
    return lanes_output(joiners)


def lanes_output(joiners) -> str:
    return "\n".join(f"joiner {j.pid} {'running' if j.poll() is None else 'ended'}:\n"
                     + "".join(j.lines[-40:]) for j in joiners)


def control_process_threads(node_pid: int) -> list[str]:
    """The names of the threads of the node's control process (the one child running
    oxygen_ros.ros.control_process)."""
    children = Path(f"/proc/{node_pid}/task/{node_pid}/children").read_text().split()
    control = [pid for pid in children
               if b"oxygen_ros.ros.control_process" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(control) == 1, children
    return sorted(path.read_text().strip()
                  for path in Path(f"/proc/{control[0]}/task").glob("*/comm"))
