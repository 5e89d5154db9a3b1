"""camera_ingest, started as its installed executable, turns live camera topics into Observations."""

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from oxygen_ros.msg import Observation
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState

from oxygen_ros.ros import qos
from oxygen_ros.ros.image_conversion import image_to_rgb


def installed_executable(name: str) -> Path:
    path = Path(sys.prefix) / "lib" / "oxygen_ros" / name
    assert path.exists(), f"{path} missing: run `make setup`"
    return path


def test_ingest_publishes_synchronized_resized_observations_at_camera_rate(
        processes, rclpy_context, spin_until):
    # 160x120 frames (57 KB): under load Jazzy's Fast DDS lost a quarter of the sets of
    # three best-effort 320x240 frames (230 KB each) between the camera and the ingest
    processes.python("-m", "oxygen_ros.ros.synthetic_camera", "--ros-args",
                     "-p", "rate_hz:=20.0", "-p", "width:=160", "-p", "height:=120")
    processes.start(installed_executable("camera_ingest"), "--ros-args", "-p", "image_size:=96",
                    "-p", "camera_topics:=['/cameras/base/image_raw',"
                          "'/cameras/left_wrist/image_raw','/cameras/right_wrist/image_raw']")

    node = Node("observer", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    received = []
    node.create_subscription(Observation, "/oxygen/observation",
                             lambda msg: received.append((time.monotonic(), msg)), qos.RELIABLE)
    assert spin_until(executor, lambda: len(received) >= 45, timeout_s=60.0), len(received)
    # an observation per camera tick, judged by the stamps it carries: the rate this process
    # receives at also holds its own scheduling (on a loaded core it saw 12 Hz), and frames
    # travel best effort (Jazzy's Fast DDS lost 13 of 127 ticks of one raw camera topic to
    # a plain subscriber, beside the same ingest: 6 sets went incomplete)
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _, m in received[5:]]
    ticks = np.diff(stamps)
    assert np.median(ticks) == pytest.approx(1 / 20, abs=0.005), ticks
    assert len(ticks) / round((stamps[-1] - stamps[0]) * 20) >= 0.8, ticks

    msg = received[-1][1]
    assert list(msg.camera_names) == ["base", "left_wrist", "right_wrist"]
    assert [(i.height, i.width, i.encoding) for i in msg.images] == [(96, 96, "rgb8")] * 3
    assert len(msg.state.name) == len(msg.state.position) == 14
    # all cameras of one set come from one tick: one stamp, joint state stamped alike
    assert {(i.header.stamp.sec, i.header.stamp.nanosec) for i in msg.images} == {
        (msg.header.stamp.sec, msg.header.stamp.nanosec)}
    assert msg.state.header.stamp == msg.header.stamp
    assert image_to_rgb(msg.images[0]).std() > 10  # a real picture, not a blank

    # a gripper driver publishes its own joint on the same topic, at 10 Hz: its position
    # and the synthetic robot's 14 merge into one state, in one layout
    gripper = node.create_publisher(JointState, "/joint_states", qos.SENSOR)

    def publish_gripper():
        msg = JointState(name=["gripper"], position=[0.5])
        msg.header.stamp = node.get_clock().now().to_msg()
        gripper.publish(msg)
    node.create_timer(0.1, publish_gripper)
    joints = list(msg.state.name)
    merged = lambda: [m for _, m in received if "gripper" in m.state.name]  # noqa: E731
    assert spin_until(executor, lambda: len(merged()) >= 5, timeout_s=60.0), len(received)
    for msg in merged():
        assert list(msg.state.name) == joints + ["gripper"], list(msg.state.name)
        assert msg.state.position[-1] == 0.5
    executor.remove_node(node)
    node.destroy_node()


def test_demo_command_replays_a_bag_through_the_graph_and_summarizes(processes, tmp_path):
    summary_path = tmp_path / "summary.json"
    demo = processes.python("-m", "oxygen_ros.cli", "demo", "--bag", str(tmp_path / "bag"),
                            "--summary", str(summary_path))
    output = processes.finish(demo, timeout=240)
    assert demo.returncode == 0, output[-3000:]
    assert "actions  " in output and " Hz" in output  # the live stats lines
    assert any(line.startswith("summary:") for line in output.splitlines())
    summary = json.loads(summary_path.read_text())
    # what a user judges: every request answered, commands at the rate, the node's own
    # accounting of held commands and its prediction in the same report
    assert summary["dialogue_requests"] == 6 and summary["dialogue_answers"] == 6, summary
    # each whole: the model ended it (or reached its token limit), none cut short
    assert set(summary["dialogue_endings"]) <= {"eos", "length"}, summary["dialogue_endings"]
    assert {row["finish_reason"] for row in summary["answers"]} <= {"eos", "length"}, summary
    assert summary["action_chunks"] >= 3 and summary["commands_received"] >= 100, summary
    assert 45.0 <= summary["commands_hz"] <= 55.0, summary
    assert summary["held_command_fraction"] <= summary["predicted_held_fraction"] + 0.1, summary
    assert summary["frames"] >= summary["action_chunks"] and summary["language_tokens"] > 0
    assert summary["torch_threads"] >= 1
    # judged against the world's ground truth, with the shipped demo model (the random
    # small preset scores 0 and action_error ~0.35), at issue 13's end-to-end targets: 80 %
    # of the answers, the memory summaries right. The shipped model answers each of the
    # six right on every camera frame from its moment to 0.14 s later in 24 unseen worlds
    # (`oxygen-ros evaluate-demo`); in this world, over every frame to 1 s later (the
    # stamps allowed below), 90 of 92 (4.33 s, 0.03 s after the lift, still "picking
    # up"; 6.73 s: "two"). Its executed commands are 0.06 of the joint range off the
    # expert's here.
    assert [row["truth"] is not None for row in summary["answers"]] == [True] * 6
    # each answer is stamped with the observation it read: a camera frame of the bag taken
    # around the question (the newest when the engine took the request up)
    for row in summary["answers"]:
        assert row["t"] - 0.5 <= row["about_s"] <= row["t"] + 1.0, row
        assert abs(row["about_s"] * 15 - round(row["about_s"] * 15)) < 1e-4, row
    assert summary["answer_accuracy"] >= 0.8, summary["answers"]
    # the configuration ros2 launch ... preset:=demo gives (test_launch_plan holds the
    # arguments equal): humanoid_demo.yaml's 4 s memory window, what the model was trained on
    assert Path(summary["params_file"]).name == "humanoid_demo.yaml"
    assert summary["memory_period_s"] == 4.0
    assert summary["memory_summaries"] >= 2, summary["memory"]
    assert summary["memory_accuracy"] == 1.0, summary["memory"]
    assert 0.0 < summary["action_error"] <= 0.1, summary["action_error"]
    # Real-Time Chunking switched every chunk after the first
    assert summary["chunk_switch"] == "rtc"
    assert summary["rtc_chunks"] >= summary["action_chunks"] // 2   # (1 Hz diagnostics lag)


def test_a_camera_topic_without_frames_is_reported_in_diagnostics(processes, tmp_path,
                                                                 rclpy_context):
    from graph_helpers import Probe, write_params

    params = write_params(tmp_path / "params.yaml")
    ingest = processes.start(installed_executable("camera_ingest"), "--ros-args",
                             "--params-file", params)
    probe = Probe(rclpy_context)
    try:
        assert probe.spin(30.0, until=lambda: "oxygen_ros: camera_ingest" in probe.diagnostics
                          and probe.diagnostics["oxygen_ros: camera_ingest"][1] != "ok"), \
            "".join(ingest.lines)
        level, message, values, _ = probe.diagnostics["oxygen_ros: camera_ingest"]
        assert level == 1 and "no frames" in message                   # WARN
        assert "/cameras/base/image_raw" in message and values["silent_cameras"] == "2"
    finally:
        probe.close()


UDP_ONLY = """<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns="http://www.eprosima.com"><profiles>
  <transport_descriptors><transport_descriptor>
    <transport_id>udp_loopback</transport_id><type>UDPv4</type>
    <interfaceWhiteList><address>127.0.0.1</address></interfaceWhiteList>
  </transport_descriptor></transport_descriptors>
  <participant profile_name="udp_only" is_default_profile="true"><rtps>
    <useBuiltinTransports>false</useBuiltinTransports>
    <userTransports><transport_id>udp_loopback</transport_id></userTransports>
  </rtps></participant>
</profiles></dds>
"""


def test_frames_lost_in_transport_are_counted_with_those_received(processes, tmp_path,
                                                                  rclpy_context):
    """A camera on UDP alone sends raw 1280x960 frames (3.7 MB: most are lost on loopback
    UDP): every frame sent is counted, received (frames) or reported lost by DDS
    (lost_frames), and a loss is logged with what to do about it."""
    from graph_helpers import Probe, write_params

    params = write_params(tmp_path / "params.yaml", ingest={
        "camera_topics": ["/cameras/base/image_raw"], "camera_names": ["base"],
        "max_image_pixels": 1280 * 960})
    ingest = processes.start(installed_executable("camera_ingest"), "--ros-args",
                             "--params-file", params)
    profile = tmp_path / "udp_only.xml"
    profile.write_text(UDP_ONLY)
    camera = processes.python(Path(__file__).parent / "nodes" / "lossy_camera.py",
                              stdin=subprocess.PIPE, env={
                                  "FASTDDS_DEFAULT_PROFILES_FILE": str(profile),
                                  "FASTRTPS_DEFAULT_PROFILES_FILE": str(profile)})
    probe = Probe(rclpy_context)

    def counted() -> list:
        return [int(values["frames"]) + int(values["lost_frames"])
                for _, values in probe.reports_of("camera_ingest")]

    try:
        assert probe.spin(60.0, until=lambda: any(counted())), "".join(ingest.lines)[-3000:]
        camera.stdin.write("pause\n")
        camera.stdin.flush()
        wait_for_line(camera, "paused", 60.0)
        reported = len(counted())
        # every frame of before the pause taken: two reports in a row count the same
        assert probe.spin(60.0, until=lambda: len(counted()) > reported + 1
                          and counted()[-1] == counted()[-2]), counted()
        before = counted()[-1]
        camera.stdin.write("go\n")
        camera.stdin.flush()
        wait_for_line(camera, "sent 25", 60.0)
        assert probe.spin(60.0, until=lambda: counted()[-1] >= before + 25), (before, counted())
        probe.spin(1.2)                             # and no frame counted twice
        assert counted()[-1] == before + 25, (before, counted())
        lost = probe.counter("camera_ingest", "lost_frames")
        logged = "".join(ingest.lines)
        assert lost == 0 or ("/cameras/base/image_raw: " in logged
                             and "messages lost in transport" in logged
                             and "shared-memory profile" in logged), logged[-3000:]
    finally:
        probe.close()


def wait_for_line(child, text: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and child.poll() is None:
        if found := [line for line in list(child.lines) if text in line]:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} in {''.join(child.lines)[-3000:]}")
