"""One inference server for two robots (`robots: [alpha, beta]`), across processes: each
robot gets its own commands, chunks, answers and memory under /<robot>/, every one about
its own observations (no cross-talk; beta's lack a camera, and only beta's answers say
so); one robot's silent camera trips only its watchdog;
two servers with disjoint lists serve side by side, and a robot named by two servers is
an error both report."""

import threading
import time

import numpy as np
import yaml
from oxygen_ros.msg import Observation
from rclpy.action import ActionClient
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_msgs.msg import String

from graph_helpers import CAMERAS, JOINTS, Probe, executable, results, write_params
from oxygen_ros.action import Ask
from oxygen_ros.ros import qos
from oxygen_ros.ros.dialogue_router import ask_client_qos
from oxygen_ros.ros.image_conversion import rgb_to_image

ROBOTS = ("alpha", "beta")


class Feeder:
    """Publishes each robot's observations at 20 Hz from the test process and keeps the
    stamps it sent, per robot; a robot in `partial` sends its first camera only."""

    def __init__(self, context, robots, partial=()):
        self.node = Node("feeder", context=context)
        self.publishers = {robot: self.node.create_publisher(
            Observation, f"/{robot}/oxygen/observation", qos.RELIABLE) for robot in robots}
        self.stamps = {robot: [] for robot in robots}
        self.silent: set = set()
        self.partial = set(partial)
        self._stop = threading.Event()
        self._rng = np.random.default_rng(0)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.05):
            for robot, publisher in self.publishers.items():
                if robot in self.silent:
                    continue
                cameras = CAMERAS[:1] if robot in self.partial else CAMERAS
                msg = Observation(camera_names=list(cameras))
                msg.header.stamp = self.node.get_clock().now().to_msg()
                msg.images = [rgb_to_image(self._rng.integers(0, 256, (28, 28, 3), np.uint8),
                                           Image, msg.header.stamp, c) for c in cameras]
                msg.state.name = list(JOINTS)
                msg.state.position = self._rng.uniform(-1, 1, len(JOINTS)).tolist()
                self.stamps[robot].append((msg.header.stamp.sec, msg.header.stamp.nanosec))
                publisher.publish(msg)

    def sent(self, robot: str, stamp) -> bool:
        """`stamp` is one of the robot's observations' stamps, to the nanosecond."""
        return (stamp.sec, stamp.nanosec) in self.stamps[robot]

    def close(self):
        self._stop.set()
        self._thread.join()
        self.node.destroy_node()


def seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def start_server(processes, tmp_path, name: str, robots):
    # a 1 s watchdog: a silent robot trips it within seconds, and a loaded machine (one
    # core, another suite beside it) does not stall a robot's 20 Hz observations that long.
    # Admission off: on such a machine a frame can stall a second, and the server then sheds
    # a robot, as it should (test/engine/test_fleet.py tests that); here both must be served.
    params = write_params(tmp_path / f"{name}.yaml", inference={
        "watchdog_ticks": 50, "memory_period_s": 1.0, "admission": False})
    values = yaml.safe_load(params.read_text())["inference"]
    params.write_text(yaml.safe_dump({name: values}))       # the node named `name`
    return processes.start(executable("inference"), "--ros-args", "--params-file", params,
                           "-r", f"__node:={name}", "-p", f"robots:={list(robots)}")


def spin_probes(probes, seconds_: float, until) -> bool:
    deadline = time.monotonic() + seconds_
    while time.monotonic() < deadline:
        if until():
            return True
        for probe in probes:
            probe.spin(0.01)
    return until()


def test_two_robots_through_one_server_each_get_their_own_outputs(
        tmp_path, processes, rclpy_context):
    server = start_server(processes, tmp_path, "inference", ROBOTS)
    probes = {robot: Probe(rclpy_context, robot) for robot in ROBOTS}
    alpha, beta = probes["alpha"], probes["beta"]
    feeder = Feeder(rclpy_context, ROBOTS, partial=("beta",))    # beta lacks a camera
    log = lambda: "".join(server.lines)[-3000:]  # noqa: E731
    try:
        assert spin_probes(probes.values(), 90.0, lambda: all(
            len(p.commands) > 50 and p.memory for p in probes.values())), log()
        for robot, probe in probes.items():
            probe.requests.publish(String(data=f"what does {robot} see?"))
        assert spin_probes(probes.values(), 60.0, lambda: all(
            any(m.final for m in p.dialogue) for p in probes.values())), log()
        for robot, probe in probes.items():
            other = next(r for r in ROBOTS if r != robot)
            assert probe.chunks and all(feeder.sent(robot, c.header.stamp)
                                        and not feeder.sent(other, c.header.stamp)
                                        for c in probe.chunks), robot
            # each chunk played becomes its own robot's trajectory, from its stamp on (a
            # watchdog stop on a loaded machine adds a hold: one point, stamp zero)
            plans = [t for t in probe.trajectories if t.header.stamp.sec]
            holds = [t for t in probe.trajectories if not t.header.stamp.sec]
            assert all(list(t.joint_names) == list(probe.chunks[0].joint_names)
                       for t in probe.trajectories), robot
            assert plans and all(
                feeder.sent(robot, t.header.stamp) and not feeder.sent(other, t.header.stamp)
                and 0 < len(t.points) <= probe.chunks[0].horizon for t in plans), (
                robot, [(t.header.stamp.sec, t.header.stamp.nanosec, len(t.points))
                        for t in plans])
            assert all(len(t.points) == 1 for t in holds), (robot, holds)
            finals = [m for m in probe.dialogue if m.final]
            assert len(finals) == 1 and feeder.sent(robot, finals[0].header.stamp), finals
            assert finals[0].finish_reason in ("eos", "length"), finals
            # each answer says which cameras its own observation lacked
            assert list(finals[0].missing_cameras) == (list(CAMERAS[1:]) if robot == "beta"
                                                       else []), finals
            # no check on the text: a random model's greedy summary may be only special
            # tokens, which decode to nothing
            assert all(seconds(m.window_end) > seconds(m.window_start)
                       for m in probe.memory), probe.memory
            # a window's bounds are its own robot's observations' stamps, to the nanosecond
            assert all(feeder.sent(robot, m.window_start) and feeder.sent(robot, m.window_end)
                       for m in probe.memory), probe.memory
            level, message, values, _ = alpha.diagnostics[f"oxygen_ros: inference/{robot}"]
            assert values["robot"] == robot and values["watchdog"] == "ok", message
            assert values["control_lost_messages"] == "0", values  # its control process reads
        # an Ask result says so too
        asker = ActionClient(beta.node, Ask, "/beta/oxygen/ask", **ask_client_qos(1))
        assert asker.wait_for_server(timeout_sec=60.0)
        assert spin_probes(probes.values(), 60.0, lambda: alpha.counter("inference/beta",
                                                                        "ask_clients") >= 1)
        sent = asker.send_goal_async(Ask.Goal(question="and now?", max_tokens=4))
        assert spin_probes(probes.values(), 60.0, sent.done) and sent.result().accepted
        [answered] = results(beta, [sent.result()], server)
        assert list(answered.result.missing_cameras) == CAMERAS[1:], answered.result
        asker.destroy()
        # a request cut to max_request_tokens counts in its own robot's status only
        alpha.requests.publish(String(data="why? " * 200))
        assert spin_probes(probes.values(), 60.0, lambda: alpha.counter(
            "inference/alpha", "truncated_requests") == 1), log()
        assert alpha.counter("inference/beta", "truncated_requests") == 0

        def trips(robot: str) -> int:
            return int(alpha.diagnostics[f"oxygen_ros: inference/{robot}"][2]["watchdog_trips"])

        # beta's camera goes silent: beta's watchdog trips, alpha goes on
        before = {robot: trips(robot) for robot in ROBOTS}
        feeder.silent.add("beta")
        assert spin_probes(probes.values(), 10.0, lambda: alpha.diagnostics[
            "oxygen_ros: inference/beta"][2]["watchdog"] == "stale"), alpha.diagnostics
        beta_commands, alpha_commands = len(beta.commands), len(alpha.commands)
        spin_probes(probes.values(), 1.5, lambda: False)
        assert len(beta.commands) == beta_commands
        assert len(alpha.commands) - alpha_commands >= 50, len(alpha.commands) - alpha_commands
        level, message, values, _ = alpha.diagnostics["oxygen_ros: inference/alpha"]
        assert values["watchdog"] == "ok" and trips("alpha") == before["alpha"], message
        level, message, values, _ = alpha.diagnostics["oxygen_ros: inference/beta"]
        assert level == 2 and trips("beta") == before["beta"] + 1, message
    finally:
        feeder.close()
        for probe in probes.values():
            probe.close()


def test_servers_with_disjoint_robots_run_side_by_side_and_a_robot_named_twice_is_reported(
        tmp_path, processes, rclpy_context):
    start_server(processes, tmp_path, "inference_a", ["alpha"])
    start_server(processes, tmp_path, "inference_b", ["beta"])
    probes = {robot: Probe(rclpy_context, robot) for robot in ROBOTS}
    feeder = Feeder(rclpy_context, ("alpha", "beta", "gamma"))
    probe = probes["alpha"]
    try:
        statuses = (("oxygen_ros: inference/alpha", "inference_a"),
                    ("oxygen_ros: inference/beta", "inference_b"))
        # commands flow before the first diagnostics report (once a second) arrives
        assert spin_probes(probes.values(), 90.0, lambda: all(
            len(p.commands) > 20 for p in probes.values()) and all(
            status in probe.by_reporter for status in statuses)), probe.by_reporter
        for status in statuses:
            assert "served by" not in probe.by_reporter[status][1], probe.by_reporter
        assert ("oxygen_ros: inference/alpha", "inference_b") not in probe.by_reporter

        # a third server names beta (and gamma): beta is served twice, and both servers say so
        third = start_server(processes, tmp_path, "inference_c", ["beta", "gamma"])

        def twice(server: str) -> bool:
            level, message = probe.by_reporter.get(("oxygen_ros: inference/beta", server),
                                                   (0, ""))
            return level == 2 and "served by 2 inference servers" in message
        assert spin_probes([probe], 90.0, lambda: twice("inference_b") and twice("inference_c")), \
            ("".join(third.lines)[-2000:], probe.by_reporter)
        assert "served by" not in probe.by_reporter[("oxygen_ros: inference/alpha",
                                                      "inference_a")][1], probe.by_reporter
    finally:
        feeder.close()
        for probe_ in probes.values():
            probe_.close()


def test_each_robot_says_its_own_request_waits_for_a_first_observation(
        tmp_path, processes, rclpy_context):
    """No camera at all: a request to alpha and one to beta each wait and end timeout, and
    the log names each robot (one robot's line does not silence the other's)."""
    params = write_params(tmp_path / "params.yaml", inference={
        "admission": False, "request_timeout_s": 2.0})
    server = processes.start(executable("inference"), "--ros-args", "--params-file", params,
                             "-p", f"robots:={list(ROBOTS)}")
    probes = {robot: Probe(rclpy_context, robot) for robot in ROBOTS}
    log = lambda: "".join(server.lines)  # noqa: E731
    try:
        assert spin_probes(probes.values(), 90.0, lambda: all(
            p.requests.get_subscription_count() > 0 for p in probes.values())), log()[-3000:]
        for probe in probes.values():
            probe.requests.publish(String(data="what do you see?"))
        assert spin_probes(probes.values(), 60.0, lambda: all(
            any(m.final for m in p.dialogue) for p in probes.values())), log()[-3000:]
        for robot, probe in probes.items():
            assert [m.finish_reason for m in probe.dialogue if m.final] == ["timeout"]
            assert (f"a dialogue request waits: no observation of robot {robot} has been "
                    "usable yet") in log(), log()[-3000:]
    finally:
        for probe in probes.values():
            probe.close()
