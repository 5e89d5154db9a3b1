"""Bad input never kills a node and never stops the other tasks: each class is counted in
/diagnostics and logged once per burst, while actions keep flowing (separate processes)."""

import time

import numpy as np
import pytest
from graph_helpers import Probe, executable, write_params
from oxygen_ros.msg import Observation
from sensor_msgs.msg import Image
from std_msgs.msg import String

from oxygen_ros.ros import qos
from oxygen_ros.ros.image_conversion import rgb_to_image

BURST = 5


@pytest.fixture(scope="module")
def graph(module_graph_domain, tmp_path_factory):
    """Synthetic cameras -> camera_ingest -> inference, running for the whole module."""
    processes, context = module_graph_domain
    params = write_params(tmp_path_factory.mktemp("graph") / "params.yaml",
                          inference={"memory_period_s": 0.0, "watchdog_ticks": 25,
                                     "frame_period_s": 0.1})
    nodes = [processes.start(executable(name), "--ros-args", "--params-file", params)
             for name in ("camera_ingest", "inference")]
    processes.python("-m", "oxygen_ros.ros.synthetic_camera", "--ros-args",
                     "-p", "rate_hz:=20.0", "-p", "width:=64", "-p", "height:=48",
                     "-p", "camera_topics:=['/cameras/base/image_raw',"
                           "'/cameras/left_wrist/image_raw']")
    probe = Probe(context)
    publishers = {
        "observation": probe.node.create_publisher(Observation, "/oxygen/observation",
                                                   qos.RELIABLE),
        "camera": probe.node.create_publisher(Image, "/cameras/base/image_raw", qos.SENSOR),
        "request": probe.requests,
    }
    assert probe.spin(30.0, until=lambda: len(probe.commands) > 50 and
                      "oxygen_ros: camera_ingest" in probe.diagnostics), "graph did not start"
    assert probe.spin(10.0, until=lambda: all(p.get_subscription_count()
                                              for p in publishers.values()))
    yield probe, publishers, nodes
    probe.close()


def now_stamp(probe, offset_s=0.0):
    stamp = probe.node.get_clock().now().to_msg()
    stamp.sec += int(offset_s)
    return stamp


def observation(probe, cameras=("base", "left_wrist"), names=None, positions=None,
                offset_s=0.0):
    msg = Observation(camera_names=list(cameras), instruction="")
    msg.header.stamp = now_stamp(probe, offset_s)
    pixels = np.random.default_rng(0).integers(0, 256, (28, 28, 3), dtype=np.uint8)
    msg.images = [rgb_to_image(pixels, Image, msg.header.stamp, c) for c in cameras]
    msg.state.name = list(names if names is not None else [f"joint_{i}" for i in range(6)])
    msg.state.position = list(positions if positions is not None else [0.1] * len(msg.state.name))
    return msg


def check(graph, node, counter, send, log_text):
    """Send a burst of bad input; the counter rises by the burst, the warning is logged
    once, both nodes live, and actions keep flowing."""
    probe, publishers, nodes = graph
    probe.spin(1.2)  # a fresh diagnostics report
    before = probe.counter(node, counter)
    log_lines_before = sum(line.count(log_text) for n in nodes for line in n.lines)
    for _ in range(BURST):
        send(probe, publishers)
        probe.spin(0.05)
    assert probe.spin(5.0, until=lambda: probe.counter(node, counter) >= before + BURST), (
        counter, probe.counter(node, counter), before)
    commands = len(probe.commands)
    probe.spin(1.0)
    assert len(probe.commands) >= commands + 35, "actions stopped"
    assert all(n.poll() is None for n in nodes), "a node died"
    log_lines = sum(line.count(log_text) for n in nodes for line in n.lines)
    assert log_lines == log_lines_before + 1, f"{log_text!r} logged {log_lines - log_lines_before}x"


def test_wrong_encoding_is_counted_by_ingest(graph):
    def send(probe, pubs):
        pubs["camera"].publish(Image(height=2, width=2, encoding="yuv422", step=4,
                                     data=bytes(8), header=Observation().header.__class__(
                                         stamp=now_stamp(probe))))
    check(graph, "camera_ingest", "conversion_errors", send, "unsupported encoding")


def test_wrong_size_is_counted_by_ingest(graph):
    def send(probe, pubs):
        msg = Image(height=100, width=100, encoding="rgb8", step=300, data=bytes(10))
        msg.header.stamp = now_stamp(probe)
        pubs["camera"].publish(msg)
    check(graph, "camera_ingest", "conversion_errors", send, "data bytes")


def test_missing_camera_is_masked_and_counted(graph):
    check(graph, "inference", "missing_camera",
          lambda probe, pubs: pubs["observation"].publish(observation(probe, cameras=["base"])),
          "missing_camera")


def test_mismatched_joint_names_are_counted(graph):
    check(graph, "inference", "joint_names_mismatch",
          lambda probe, pubs: pubs["observation"].publish(
              observation(probe, names=["elbow", "wrist"])), "joint_names_mismatch")


def test_nan_joint_state_is_counted(graph):
    check(graph, "inference", "non_finite_state",
          lambda probe, pubs: pubs["observation"].publish(
              observation(probe, positions=[float("nan")] * 6)), "non_finite_state")


def test_empty_prompt_is_ignored_and_counted(graph):
    check(graph, "inference", "empty_request",
          lambda probe, pubs: pubs["request"].publish(String(data="   ")), "empty_request")


def test_one_megabyte_prompt_is_cut_counted_and_still_answered(graph):
    probe = graph[0]
    finals = sum(1 for m in probe.dialogue if m.final)
    check(graph, "inference", "truncated_request",
          lambda probe, pubs: pubs["request"].publish(String(data="x" * 1_000_000)),
          "truncated_request")
    assert probe.spin(40.0, until=lambda: sum(1 for m in probe.dialogue if m.final)
                      >= finals + BURST), "the long requests were not answered"


def test_observations_from_the_future_are_counted(graph):
    check(graph, "inference", "future_stamp",
          lambda probe, pubs: pubs["observation"].publish(observation(probe, offset_s=100)),
          "future_stamp")


def test_observations_from_the_past_are_counted(graph):
    check(graph, "inference", "stale_stamp",
          lambda probe, pubs: pubs["observation"].publish(observation(probe, offset_s=-100)),
          "stale_stamp")


def test_camera_frames_from_the_future_are_dropped_by_ingest(graph):
    def send(probe, pubs):
        pixels = np.zeros((48, 64, 3), np.uint8)
        pubs["camera"].publish(rgb_to_image(pixels, Image, now_stamp(probe, 100), "base"))
    time.sleep(0.1)
    check(graph, "camera_ingest", "future", send, "stamped in the future")
