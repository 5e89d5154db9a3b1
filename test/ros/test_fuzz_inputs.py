"""Property-based fuzzing of every inbound message at the conversion layer: whatever a
message's fields hold (within the types' ranges), the outcome is a converted value or a
counted kind of problem — never another exception."""

import struct

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oxygen_ros.msg import Observation
from sensor_msgs.msg import CompressedImage, Image, JointState

from oxygen_ros.ros.conversions import clean_instruction, joint_state_problem, observation_from_msg
from oxygen_ros.model.letterbox import resize_rgb
from oxygen_ros.ros.image_conversion import (
    ImageConversionError,
    compressed_to_rgb,
    image_to_rgb,
)

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
uint32 = st.integers(0, 2**32 - 1)
small = st.integers(0, 64)
encodings = st.sampled_from(["rgb8", "bgr8", "rgba8", "bgra8", "mono8", "mono16", "yuv422",
                             "yuv422_yuy2", "uyvy", "yuyv", "bayer_rggb8", "32FC1", "",
                             "RGB8"]) | st.text(max_size=12)
floats = st.floats(allow_nan=True, allow_infinity=True, width=64)


def ingest(convert):
    """What camera_ingest does with a message: convert, then resize to the model."""
    try:
        rgb = convert()
    except ImageConversionError as error:
        assert error.kind in ("unsupported_encoding", "wrong_size", "undecodable",
                              "empty_image", "too_large", "degenerate_aspect")
        return None
    assert rgb.dtype == np.uint8 and rgb.ndim == 3 and rgb.shape[2] == 3
    for mode in ("pad", "stretch"):
        assert resize_rgb(rgb, 28, mode).shape == (28, 28, 3)
    return rgb


@FUZZ
@given(height=uint32 | small, width=uint32 | small, step=uint32 | st.integers(0, 256),
       encoding=encodings, bigendian=st.integers(0, 255), data=st.binary(max_size=4096))
def test_any_image_message_converts_or_names_its_problem(height, width, step, encoding,
                                                         bigendian, data):
    msg = Image(height=height, width=width, step=step, encoding=encoding,
                is_bigendian=bigendian, data=data)
    ingest(lambda: image_to_rgb(msg))


def png_header(width, height):
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", width, height)


def jpeg_header(width, height):
    return (b"\xff\xd8\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + bytes(9)
            + b"\xff\xc0" + struct.pack(">HBHH", 17, 8, height, width))


headers = st.builds(png_header, uint32, uint32) | st.builds(jpeg_header, st.integers(0, 65535),
                                                             st.integers(0, 65535))


@FUZZ
@given(prefix=headers | st.just(b""), tail=st.binary(max_size=2048), fmt=st.text(max_size=20),
       size=st.sampled_from([0, 28, 224]))
def test_any_compressed_image_converts_or_names_its_problem(prefix, tail, fmt, size):
    msg = CompressedImage(format=fmt, data=prefix + tail)
    ingest(lambda: compressed_to_rgb(msg, size))


@FUZZ
@given(names=st.lists(st.text(max_size=8), max_size=8), positions=st.lists(floats, max_size=8))
def test_any_joint_state_is_usable_or_names_its_problem(names, positions):
    problem = joint_state_problem(JointState(name=names, position=positions))
    assert problem in ("", "joint_state_mismatch", "non_finite_joint_state")
    if not problem:
        assert len(names) == len(positions) and all(np.isfinite(positions))


@FUZZ
@given(text=st.text(max_size=3000))
def test_any_instruction_is_used_cut_or_ignored(text):
    kept, problem = clean_instruction(text)
    assert (kept, problem) == (text, "") or problem in ("empty_instruction", "long_instruction")
    assert kept is None or len(kept) <= 1000


@FUZZ
@given(cameras=st.lists(st.sampled_from(["base", "left_wrist", "right_wrist", "", "x"]),
                        max_size=4),
       images=st.lists(st.builds(Image, height=small, width=small, step=st.integers(0, 256),
                                 encoding=encodings, data=st.binary(max_size=2048)), max_size=4),
       names=st.lists(st.sampled_from(["joint_0", "joint_1", "j"]), max_size=4),
       positions=st.lists(floats, max_size=4), instruction=st.text(max_size=50))
def test_any_observation_decodes_or_names_its_problems(cameras, images, names, positions,
                                                       instruction):
    msg = Observation(camera_names=cameras, images=images, instruction=instruction)
    msg.state.name, msg.state.position = names, positions
    decoded = observation_from_msg(msg, ["base", "left_wrist"], ["joint_0", "joint_1"],
                                   "default task", 28)
    assert all(isinstance(p, str) and p for p in decoded.problems)
    if decoded.observation is not None:
        assert np.isfinite(decoded.observation.state).all()
        assert {"joint_0", "joint_1"} <= set(names)      # never a made-up position
        assert set(decoded.observation.images) <= {"base", "left_wrist"}
