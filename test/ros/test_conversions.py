"""Observation messages become engine observations (with every problem named); chunks
become ActionChunk and JointTrajectory messages with the right times; text reaches a ROS
string whole."""

import numpy as np
from oxygen_ros.action import Ask
from oxygen_ros.msg import DialogueChunk, MemorySummary, Observation
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import Image

from oxygen_ros.engine.outputs import TextChunk
from oxygen_ros.ros import conversions, stamps, trajectories
from oxygen_ros.ros.image_conversion import rgb_to_image

CAMERAS, JOINTS = ["base", "wrist"], ["a", "b", "c"]


def message(cameras=CAMERAS, names=JOINTS, positions=(0.1, 0.2, 0.3), encoding="rgb8"):
    msg = Observation(camera_names=list(cameras), instruction="")
    msg.header.stamp.sec, msg.header.stamp.nanosec = 12, 500_000_000
    for name in cameras:
        image = rgb_to_image(np.full((4, 4, 3), 7, np.uint8), Image, msg.header.stamp, name)
        image.encoding = encoding
        msg.images.append(image)
    msg.state.name, msg.state.position = list(names), list(positions)
    return msg


def test_a_good_observation_decodes_without_problems():
    decoded = conversions.observation_from_msg(message(), CAMERAS, JOINTS, "fallback task")
    assert decoded.problems == []
    observation = decoded.observation
    assert set(observation.images) == set(CAMERAS) and observation.stamp == 12.5
    np.testing.assert_allclose(observation.state, [0.1, 0.2, 0.3])
    assert observation.instruction == "fallback task"


def test_state_follows_the_configured_joint_order():
    decoded = conversions.observation_from_msg(
        message(names=["c", "x", "a", "b"], positions=(3.0, 9.0, 1.0, 2.0)), CAMERAS, JOINTS, "")
    np.testing.assert_allclose(decoded.observation.state, [1.0, 2.0, 3.0])
    assert decoded.problems == []


def test_a_state_without_a_configured_joint_or_not_finite_is_dropped_and_named():
    missing = conversions.observation_from_msg(
        message(names=["c", "a", "x"], positions=(3.0, 1.0, 9.0)), CAMERAS, JOINTS, "")
    assert missing.observation is None
    assert missing.problems == ["joint_names_mismatch"]
    assert missing.details["joint_names_mismatch"] == "no position for 'b' (dropped)"
    nan = conversions.observation_from_msg(
        message(names=["c", "a", "b"], positions=(3.0, float("nan"), float("inf"))),
        CAMERAS, JOINTS, "")
    assert nan.observation is None
    assert nan.problems == ["non_finite_state"]
    assert nan.details["non_finite_state"] == "joint positions not finite: 'a', 'b' (dropped)"
    twice = conversions.observation_from_msg(
        message(names=["a", "b", "a", "c"], positions=(1.0, 2.0, 4.0, 3.0)), CAMERAS, JOINTS, "")
    np.testing.assert_allclose(twice.observation.state, [4.0, 2.0, 3.0])
    assert twice.problems == ["joint_state_mismatch"]
    assert twice.details == {"joint_state_mismatch": "4 joint names (3 different), 4 positions"}


def test_unusable_cameras_are_dropped_and_named():
    decoded = conversions.observation_from_msg(message(cameras=["base", "top"]), CAMERAS,
                                               JOINTS, "")
    assert set(decoded.observation.images) == {"base"}
    assert decoded.problems == ["unknown_camera", "missing_camera"]
    assert decoded.details == {
        "unknown_camera": f"camera 'top' is not one of {list(CAMERAS)}",
        "missing_camera": "no image from " + ", ".join(repr(c) for c in CAMERAS[1:])
                          + " (camera_ingest had none within sync_slop_s of the first "
                          "camera's, or the camera is silent)"}
    bad = conversions.observation_from_msg(message(encoding="bayer_rggb8"), CAMERAS, JOINTS, "")
    # each kind once per message, however many cameras had it
    assert bad.observation is None and bad.problems == ["bad_image", "no_usable_camera"]


def test_chunk_and_trajectory_messages():
    actions = np.arange(12, dtype=np.float32).reshape(4, 3)
    stamp_ns = 1_796_631_811_654_914_338    # as a header carries it: kept to the nanosecond
    chunk = conversions.action_chunk_msg(9, stamp_ns, actions, 0.02, JOINTS)
    assert (chunk.frame_id, chunk.horizon, chunk.action_dim) == (9, 4, 3)
    assert list(chunk.actions) == list(range(12))
    assert (chunk.header.stamp.sec, chunk.header.stamp.nanosec) == (1_796_631_811, 654_914_338)
    assert stamps.stamp_ns(chunk.header.stamp) == stamp_ns
    trajectory = trajectories.trajectory_msg(stamp_ns, actions, 0.5, JOINTS, first_step=1)
    assert trajectory.header.stamp == chunk.header.stamp
    assert [p.positions.tolist() if hasattr(p.positions, "tolist") else list(p.positions)
            for p in trajectory.points] == actions[1:].tolist()
    assert [(p.time_from_start.sec, p.time_from_start.nanosec) for p in trajectory.points] == [
        (0, 500_000_000), (1, 0), (1, 500_000_000)]
    # a duration a hair under a whole second is that second, not 1e9 nanoseconds
    whole = trajectories.duration(0.9999999999999)
    assert (whole.sec, whole.nanosec) == (1, 0)


def test_a_stale_stamp_is_explained_by_what_most_likely_made_it():
    """A zero stamp: its publisher never set one; a minute and more: a bag's recorded
    stamps, or on sim time a /clock ahead of them; a late message: only its age."""
    text = conversions.stale_stamp_text
    assert text(2.5, 7, False) == "stamp 2.500 s old"
    assert text(1.8e9, 0, False).startswith("stamp zero: its publisher left header.stamp unset")
    assert text(1.8e9, 0, True) == text(1.8e9, 0, False)
    years = text(96_632_363.0, 10**18, False)
    assert years.startswith("stamp 96632363 s (3.1 years) old; a bag's recorded stamps? "
                            "replay it with --clock and use_sim_time:=true"), years
    assert text(100.0, 10**18, False).startswith("stamp 100 s (1.7 min) old; a bag's")
    assert text(7200.0, 10**18, False).startswith("stamp 7200 s (2.0 h) old")
    assert text(3 * 86400.0, 10**18, False).startswith("stamp 259200 s (3.0 days) old")
    on_clock = text(100.0, 10**18, True)
    assert "--restamp" not in on_clock and "/clock runs ahead of these stamps" in on_clock


def test_a_future_stamp_says_how_far_ahead_or_that_no_clock_came_yet():
    """On sim time before /clock ticked, every stamp is 'ahead' of zero: the line says the
    clock has not come, not that a bag is 1.7e9 s in the future."""
    text = conversions.future_stamp_text
    assert text(100.0, 10**18, False) == "stamp 100.000 s ahead of this node's clock"
    assert text(1.7e9, 10**18, True) == "stamp 1700000000.000 s ahead of this node's clock"
    assert text(1.7e9, 0, True).startswith("stamped before this node heard /clock")
    assert text(1.7e9, 0, False) == "stamp 1700000000.000 s ahead of this node's clock"


def test_text_with_a_nul_arrives_whole():
    """A ROS string ends at its first NUL: a model's U+0000 would cut the answer short on the
    wire (the pieces then no longer add up to it); it travels as U+FFFD."""
    text = "ab\x00cd"
    assert conversions.ros_text(text) == "ab\ufffdcd"
    chunk = TextChunk(request_id=1, seq=0, text=text, final=False, kind="dialogue")
    sent = conversions.dialogue_msg(chunk, 0)
    assert deserialize_message(serialize_message(sent), DialogueChunk).text == "ab\ufffdcd"
    sent = conversions.memory_msg(text, 2, 0, 1)
    assert deserialize_message(serialize_message(sent), MemorySummary).text == "ab\ufffdcd"
    # what it guards against: the raw text is cut at the NUL
    raw = Ask.Result(answer=text)
    assert deserialize_message(serialize_message(raw), Ask.Result).answer == "ab"


def test_text_of_invisible_characters_only_is_blank():
    for blank in ("", "  \n\t", "\u00a0\u3000", "\u200b\u200b", "\ufeff\u200d", "\x01\x1b ",
                  "\u3164\u2800"):
        assert conversions.is_blank(blank), repr(blank)
        assert conversions.clean_instruction(blank) == (None, "empty_instruction")
    for text in ("what?", "\u200bhi", "e\u0301", "\U0001F600", "\u05e9\u05dc\u05d5\u05dd"):
        assert not conversions.is_blank(text), repr(text)
