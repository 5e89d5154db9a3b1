"""oxygen-ros replay: the same scene recorded as rgb8, bgr8, mono8 and JPEG gives the same
observations; timing, offset, loop, remap, restamp and /clock behave as documented."""

import threading
import time

import numpy as np
import pytest
import rclpy
from graph_helpers import executable, write_params
from oxygen_ros.msg import Observation
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from oxygen_ros.ros import qos
from oxygen_ros.ros.bag import BagReplayer, MissingTopics, restamp_cdr
from oxygen_ros.ros.demo_bag import DemoBagSpec, write_demo_bag
from oxygen_ros.ros.image_conversion import image_to_rgb


def observations_from(tmp_path, processes, context, encoding):
    bag = write_demo_bag(tmp_path / encoding, DemoBagSpec(
        duration_s=1.2, camera_hz=5.0, encoding=encoding, width=64, height=48, cameras=2,
        grayscale=True, dialogue=()))
    suffix = "/compressed" if encoding == "jpeg" else ""
    params = write_params(tmp_path / f"{encoding}.yaml", ingest={
        "max_age_s": 1e12,  # keep the recorded stamps: match frames across bags by stamp
        "camera_topics": [f"/cameras/base/image_raw{suffix}",
                          f"/cameras/left_wrist/image_raw{suffix}"]})
    ingest = processes.start(executable("camera_ingest"), "--ros-args", "--params-file", params)
    node = Node(f"collect_{encoding}", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    received = {}
    subscription = node.create_subscription(
        Observation, "/oxygen/observation", lambda m: received.setdefault(
            (m.header.stamp.sec, m.header.stamp.nanosec), [image_to_rgb(i) for i in m.images]),
        qos.RELIABLE)
    # the bag lasts 1.2 s: replay only once camera_ingest's observations reach this node
    deadline = time.monotonic() + 30
    while subscription.get_publisher_count() < 1 and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    replay = processes.python("-m", "oxygen_ros.cli", "replay", str(bag),
                              "--wait-for-subscribers", "20", "--delay", "0.3")
    deadline = time.monotonic() + 30
    while replay.poll() is None and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.05)
    executor.remove_node(node)
    node.destroy_node()
    ingest.terminate()
    return received


def test_rgb8_bgr8_mono8_and_jpeg_bags_give_the_same_observations(tmp_path, processes,
                                                                 rclpy_context):
    runs = {encoding: observations_from(tmp_path, processes, rclpy_context, encoding)
            for encoding in ("rgb8", "bgr8", "mono8", "jpeg")}
    stamps = set.intersection(*(set(r) for r in runs.values()))
    assert len(stamps) >= 4, {e: len(r) for e, r in runs.items()}
    for stamp in stamps:
        reference = runs["rgb8"][stamp]
        for encoding in ("bgr8", "mono8"):
            for got, want in zip(runs[encoding][stamp], reference):
                np.testing.assert_array_equal(got, want)
        for got, want in zip(runs["jpeg"][stamp], reference):
            assert np.abs(got.astype(int) - want).mean() < 3.0
        assert reference[0].shape == (28, 28, 3) and reference[0].std() > 5


@pytest.fixture
def bag(tmp_path):
    return write_demo_bag(tmp_path / "bag", DemoBagSpec(
        duration_s=1.0, camera_hz=5.0, joint_hz=20.0, encoding="jpeg", width=32, height=24,
        cameras=1, dialogue=((0.5, "hello"),), storage="sqlite3"))


class Listener:
    def __init__(self, context, topic, msg_type, profile=qos.SENSOR):
        self.node = Node("listener", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.messages = []
        self.node.create_subscription(msg_type, topic,
                                      lambda m: self.messages.append((time.monotonic(), m)),
                                      profile)

    def run(self, replayer, **kwargs):
        stop = threading.Event()
        replayer.wait_for_subscribers(10.0)
        started = time.monotonic()
        thread = threading.Thread(target=replayer.run, kwargs={"stop": stop})
        thread.start()
        while thread.is_alive():
            self.executor.spin_once(timeout_sec=0.01)
        for _ in range(20):
            self.executor.spin_once(timeout_sec=0.01)
        return time.monotonic() - started


def test_a_subscriber_of_another_type_than_the_bags_is_named(bag, rclpy_context, ros_domain):
    """DDS matches no subscriber of another type: the replay says which topic and types
    (an Image bag played to a CompressedImage subscriber, say), not just that none hears."""
    other = Context()     # another participant, as another process (one holds a topic's type)
    rclpy.init(context=other, domain_id=ros_domain)
    try:
        listener = Node("other_type", context=other)
        listener.create_subscription(String, "/joint_states", lambda m: None, qos.SENSOR)
        replayer = BagReplayer(Node("replayer", context=rclpy_context), bag,
                               topics=["/joint_states", "/oxygen/instruction"])
        deadline = time.monotonic() + 30
        while not replayer.type_mismatches() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert replayer.type_mismatches() == [
            "/joint_states: the bag holds sensor_msgs/msg/JointState, its subscribers take "
            "std_msgs/msg/String: none of them hears it"]
    finally:
        rclpy.shutdown(context=other)


def test_replay_keeps_the_recorded_schedule_scaled_by_rate(bag, rclpy_context):
    listener = Listener(rclpy_context, "/joint_states", JointState)
    replayer = BagReplayer(Node("replayer", context=rclpy_context), bag, rate=2.0,
                           topics=["/joint_states"])
    elapsed = listener.run(replayer)
    assert len(listener.messages) == 20
    span = listener.messages[-1][0] - listener.messages[0][0]
    assert 0.95 * 19 / 20 / 2 <= span <= 0.95 / 2 + 0.25, span   # 0.95 s of bag at 2x
    assert elapsed < 1.5
    # recorded stamps are kept
    assert listener.messages[0][1].header.stamp.sec == 1_700_000_000


def test_replay_start_offset_loop_and_remap(bag, rclpy_context):
    listener = Listener(rclpy_context, "/robot/joints", JointState)
    replayer = BagReplayer(Node("replayer", context=rclpy_context), bag, rate=4.0,
                           start_offset_s=0.5, remap={"/joint_states": "/robot/joints"},
                           topics=["/joint_states"])
    listener.run(replayer)
    assert len(listener.messages) == 10          # the last 0.5 s of 20 Hz joint states
    first = listener.messages[0][1].header.stamp
    assert (first.sec, first.nanosec) == (1_700_000_000, 500_000_000)

    looping = Listener(rclpy_context, "/oxygen/dialogue/request", String, qos.RELIABLE_DEEP)
    replayer = BagReplayer(Node("looper", context=rclpy_context), bag, rate=5.0, loop=True,
                           topics=["/oxygen/dialogue/request"])
    stop = threading.Event()
    replayer.wait_for_subscribers(10.0)
    thread = threading.Thread(target=replayer.run, kwargs={"stop": stop})
    thread.start()
    deadline = time.monotonic() + 10
    while len(looping.messages) < 3 and time.monotonic() < deadline:
        looping.executor.spin_once(timeout_sec=0.01)
    stop.set()
    thread.join(timeout=5)
    assert [m.data for _, m in looping.messages[:3]] == ["hello"] * 3
    assert replayer.stats.loops >= 2


def test_restamp_rewrites_header_stamps_and_clock_follows_bag_time(bag, rclpy_context):
    listener = Listener(rclpy_context, "/joint_states", JointState)
    clock = []
    listener.node.create_subscription(Clock, "/clock", clock.append, 10)
    replayer = BagReplayer(Node("replayer", context=rclpy_context), bag, rate=4.0,
                           restamp=True, clock_hz=50.0, topics=["/joint_states"])
    before = time.time()
    listener.run(replayer)
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _, m in listener.messages]
    assert len(stamps) == 20 and all(before - 1 <= s <= time.time() + 1 for s in stamps)
    bag_times = [c.clock.sec + c.clock.nanosec * 1e-9 for c in clock]
    assert len(bag_times) > 10 and bag_times == sorted(bag_times)
    assert 1_700_000_000.0 <= bag_times[0] and bag_times[-1] <= 1_700_000_001.0


def test_restamp_cdr_patches_only_the_stamp():
    data = bytes([0, 1, 0, 0]) + bytes(range(8)) + b"payload"
    patched = restamp_cdr(data, 5 * 10**9 + 7)
    assert patched[:4] == data[:4] and patched[12:] == b"payload"
    assert patched[4:12] == (5).to_bytes(4, "little") + (7).to_bytes(4, "little")


@pytest.mark.parametrize("option, named", [
    ("topics", dict(topics=["/joint_states", "/nope"])),
    ("remap", dict(remap={"/nope": "/x", "/joint_states": "/y"}))])
def test_a_topic_named_for_the_replay_that_the_bag_lacks_is_refused_with_the_bags_topics(
        bag, rclpy_context, option, named):
    with pytest.raises(MissingTopics, match=r"has no /nope \(its topics: .*/joint_states") as \
            refused:
        BagReplayer(Node("replayer", context=rclpy_context), bag, **named)
    assert refused.value.option == option


def foreign_bag(path):
    """A bag as another tool writes it: the instruction with no QoS metadata."""
    from rosbags.rosbag2 import Writer

    from oxygen_ros.ros.bag import TYPESTORE

    String_ = TYPESTORE.types["std_msgs/msg/String"]
    with Writer(path, version=8) as writer:
        connection = writer.add_connection("/oxygen/instruction", "std_msgs/msg/String",
                                           typestore=TYPESTORE)
        writer.write(connection, 1_700_000_000 * 10**9,
                     TYPESTORE.serialize_cdr(String_(data="stack the cups"),
                                             "std_msgs/msg/String"))
        # keeps the replay going for 10 s: a late subscriber on a loaded single core can take
        # seconds to discover it, and the replay must still be there
        writer.write(connection, 1_700_000_010 * 10**9,
                     TYPESTORE.serialize_cdr(String_(data="stack the cups"),
                                             "std_msgs/msg/String"))
    return path


def late_latched_listener(context, delay_s, processes, *replay_args, wait_s=2.0):
    """What a subscriber that joins delay_s after the replay starts gets within wait_s
    (the first message only). The foreign bag's second message comes 10 s into the bag:
    a volatile subscriber's 2 s wait ends before it; a latched one may wait longer (a
    loaded single core can delay discovery past 2 s)."""
    replay = processes.python("-m", "oxygen_ros.cli", "replay", *replay_args, "--delay", "0")
    time.sleep(delay_s)                      # the subscriber starts after the replay
    listener = Listener(context, "/oxygen/instruction", String, qos.LATCHED)
    deadline = time.monotonic() + wait_s
    while not listener.messages and time.monotonic() < deadline:
        listener.executor.spin_once(timeout_sec=0.05)
    processes.stop(replay)
    return [m.data for _, m in listener.messages]


def test_a_bag_without_qos_metadata_still_latches_the_instruction(tmp_path, processes,
                                                                 rclpy_context):
    bag = foreign_bag(tmp_path / "foreign")
    assert late_latched_listener(rclpy_context, 1.5, processes, str(bag),
                                 wait_s=10.0) == ["stack the cups"]


def test_qos_overrides_file_sets_a_topics_profile(tmp_path, processes, rclpy_context):
    from oxygen_ros.ros.bag import load_qos_overrides

    bag = foreign_bag(tmp_path / "foreign")
    overrides = tmp_path / "qos.yaml"
    overrides.write_text("/oxygen/instruction:\n  durability: volatile\n  depth: 5\n")
    assert load_qos_overrides(overrides) == {"/oxygen/instruction": {"durability": "volatile",
                                                                     "depth": 5}}
    # volatile now: a late subscriber gets nothing
    assert late_latched_listener(rclpy_context, 1.5, processes, str(bag), "--qos-overrides",
                                 str(overrides)) == []
    overrides.write_text("/oxygen/instruction:\n  durability: sometimes\n")
    with pytest.raises(ValueError, match="durability"):
        load_qos_overrides(overrides)


def test_a_start_offset_still_delivers_the_last_latched_instruction(tmp_path, processes,
                                                                    rclpy_context):
    bag = foreign_bag(tmp_path / "foreign")        # the instruction at 0 s (and at 10 s)
    assert late_latched_listener(rclpy_context, 1.5, processes, str(bag),
                                 "--start-offset", "1", wait_s=10.0) == ["stack the cups"]
