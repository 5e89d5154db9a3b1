"""Every supported encoding decodes to the same RGB pixels; bad images fail with a reason."""

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from sensor_msgs.msg import CompressedImage, Image

from oxygen_ros.model.letterbox import resize_rgb
from oxygen_ros.ros.image_conversion import (
    ImageConversionError,
    compressed_to_rgb,
    image_to_rgb,
    rgb_to_image,
)

RGB = np.random.default_rng(1).integers(0, 256, (12, 20, 3), dtype=np.uint8)
GRAY = cv2.cvtColor(RGB, cv2.COLOR_RGB2GRAY)


def image_msg(pixels: np.ndarray, encoding: str, pad: int = 0, bigendian: bool = False) -> Image:
    height, width = pixels.shape[:2]
    rows = pixels.reshape(height, -1)
    if bigendian:
        rows = rows.astype(rows.dtype.newbyteorder(">"))
    raw = rows.view(np.uint8).reshape(height, -1)
    raw = np.concatenate([raw, np.zeros((height, pad), np.uint8)], axis=1)
    return Image(height=height, width=width, encoding=encoding, is_bigendian=int(bigendian),
                 step=raw.shape[1], data=raw.tobytes())


@pytest.mark.parametrize("encoding, pixels, expected", [
    ("rgb8", RGB, RGB),
    ("bgr8", RGB[..., ::-1].copy(), RGB),
    ("rgba8", np.dstack([RGB, np.full(RGB.shape[:2], 7, np.uint8)]), RGB),
    ("bgra8", np.dstack([RGB[..., ::-1], np.full(RGB.shape[:2], 7, np.uint8)]), RGB),
    ("mono8", GRAY, np.dstack([GRAY] * 3)),
    ("mono16", GRAY.astype(np.uint16) * 257, np.dstack([GRAY] * 3)),
])
@pytest.mark.parametrize("pad", [0, 5])
def test_raw_encodings_decode_to_rgb_with_and_without_row_padding(encoding, pixels, expected, pad):
    np.testing.assert_array_equal(image_to_rgb(image_msg(pixels, encoding, pad)), expected)


def test_big_endian_mono16_decodes_like_little_endian():
    pixels = GRAY.astype(np.uint16) * 257
    np.testing.assert_array_equal(image_to_rgb(image_msg(pixels, "mono16", bigendian=True)),
                                  image_to_rgb(image_msg(pixels, "mono16")))


def bt601(y, u, v) -> np.ndarray:
    """YUV (video range) to RGB by the BT.601 formulas, written out."""
    y, u, v = (np.asarray(c, float) for c in (y, u, v))
    rgb = np.stack([1.164 * (y - 16) + 1.596 * (v - 128),
                    1.164 * (y - 16) - 0.813 * (v - 128) - 0.391 * (u - 128),
                    1.164 * (y - 16) + 2.018 * (u - 128)], axis=-1)
    return np.clip(np.round(rgb), 0, 255)


@pytest.mark.parametrize("encoding, order", [("yuv422", "UYVY"), ("uyvy", "UYVY"),
                                             ("yuv422_yuy2", "YUYV"), ("yuyv", "YUYV")])
@pytest.mark.parametrize("pad", [0, 4])
def test_yuv422_decodes_by_the_bt601_formulas_in_its_byte_order(encoding, order, pad):
    """A webcam's 4:2:2 (v4l2's YUYV, ROS's yuv422_yuy2; UYVY, ROS's yuv422): each pair of
    pixels shares its U and V."""
    rng = np.random.default_rng(2)
    height, width = 6, 8
    y = rng.integers(16, 236, (height, width))
    u, v = (rng.integers(16, 241, (height, width // 2)) for _ in range(2))
    packed = np.zeros((height, width // 2, 4), np.uint8)
    for index, name in enumerate(order):
        packed[..., index] = {"Y": y[:, 0::2] if index < 2 else y[:, 1::2], "U": u,
                              "V": v}[name]
    expected = bt601(y, np.repeat(u, 2, axis=1), np.repeat(v, 2, axis=1))
    decoded = image_to_rgb(image_msg(packed.reshape(height, width, 2), encoding, pad))
    assert np.abs(decoded.astype(float) - expected).max() <= 2, encoding


def test_png_is_lossless_and_jpeg_is_close():
    bgr = cv2.cvtColor(RGB, cv2.COLOR_RGB2BGR)
    png = CompressedImage(format="png", data=cv2.imencode(".png", bgr)[1].tobytes())
    np.testing.assert_array_equal(compressed_to_rgb(png), RGB)
    smooth = cv2.resize(RGB, (160, 96), interpolation=cv2.INTER_CUBIC)
    jpeg = CompressedImage(format="jpeg", data=cv2.imencode(
        ".jpg", cv2.cvtColor(smooth, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes())
    error = np.abs(compressed_to_rgb(jpeg).astype(int) - smooth).mean()
    assert error < 4.0, error


@pytest.mark.parametrize("msg, reason", [
    (Image(height=2, width=2, encoding="bayer_rggb8", step=2, data=bytes(4)),
     "unsupported encoding"),
    (Image(height=2, width=3, encoding="yuv422", step=6, data=bytes(12)), "must be even, not 3"),
    (Image(height=4, width=4, encoding="rgb8", step=12, data=bytes(20)), "data bytes"),
    (Image(height=4, width=4, encoding="rgb8", step=8, data=bytes(48)), "step 8"),
    (Image(height=0, width=4, encoding="rgb8", step=12, data=b""), "empty image"),
])
def test_bad_raw_images_raise_a_conversion_error_naming_the_problem(msg, reason):
    with pytest.raises(ImageConversionError, match=reason):
        image_to_rgb(msg)


def test_undecodable_compressed_image_raises_a_conversion_error_of_its_kind():
    def kind(data):
        with pytest.raises(ImageConversionError) as error:
            compressed_to_rgb(CompressedImage(format="jpeg", data=data))
        return error.value.kind
    assert kind(b"not a jpeg at all") == "unsupported_encoding"
    assert kind(b"") == "empty_image"
    assert kind(b"\xff\xd8\xff\xe0\x00\x10JFIF") == "undecodable"       # no frame header
    good = cv2.imencode(".jpg", np.zeros((48, 64, 3), np.uint8))[1].tobytes()
    header_only = good[:good.index(b"\xff\xda")]                        # no scan data
    assert kind(header_only) == "undecodable"


def test_size_limits_apply_before_decoding_and_jpegs_decode_at_the_covering_scale():
    from oxygen_ros.ros.image_conversion import compressed_size, reduction
    big = cv2.imencode(".jpg", np.zeros((720, 1280, 3), np.uint8))[1].tobytes()
    assert compressed_size(big) == ("jpeg", 1280, 720)
    with pytest.raises(ImageConversionError) as error:
        compressed_to_rgb(CompressedImage(format="jpeg", data=big), max_pixels=1280 * 719)
    assert error.value.kind == "too_large"
    # pad covers 112 px on the long side (1280 / 8 = 160), stretch on the short one
    assert reduction(1280, 720, 112, "pad") == 8 and reduction(1280, 720, 112, "stretch") == 4
    assert compressed_to_rgb(CompressedImage(format="jpeg", data=big), 112).shape == (90, 160, 3)
    with pytest.raises(ImageConversionError) as error:
        image_to_rgb(Image(height=1, width=200, encoding="rgb8", step=600, data=bytes(600)))
    assert error.value.kind == "degenerate_aspect"


def test_resize_gives_the_model_resolution_and_round_trips_through_a_message():
    resized = resize_rgb(RGB, 32, "stretch")
    assert resized.shape == (32, 32, 3) and resized.dtype == np.uint8
    assert resize_rgb(resized, 32) is resized
    np.testing.assert_array_equal(image_to_rgb(rgb_to_image(resized, Image)), resized)


def test_pad_keeps_the_aspect_ratio_on_centered_black_bars_like_resize_with_pad():
    wide = np.full((48, 64, 3), 200, np.uint8)             # 4:3 -> 24 x 32 inside 32 x 32
    padded = resize_rgb(wide, 32, "pad")
    assert padded.shape == (32, 32, 3)
    assert (padded[:4] == 0).all() and (padded[28:] == 0).all()   # 4 rows above and below
    assert (padded[4:28] == 200).all()
    tall = np.full((64, 16, 3), 9, np.uint8)               # 1:4 -> 32 x 8, 12 columns each side
    padded = resize_rgb(tall, 32, "pad")
    assert (padded[:, :12] == 0).all() and (padded[:, 12:20] == 9).all()
    assert (padded[:, 20:] == 0).all()
    with pytest.raises(ValueError, match="resize mode"):
        resize_rgb(wide, 32, "crop")


MIB = 1 << 20
GOOD_JPEG = cv2.imencode(".jpg", np.zeros((48, 64, 3), np.uint8))[1].tobytes()
SOF = GOOD_JPEG.index(b"\xff\xc0")


@pytest.mark.parametrize("name, data", [
    ("1 MiB of 0xFF labelled jpeg", b"\xff\xd8" + b"\xff" * (MIB - 2)),
    ("4 MiB of 0xFF labelled jpeg", b"\xff\xd8" + b"\xff" * (4 * MIB - 2)),
    ("1 MiB of empty comment segments", b"\xff\xd8" + b"\xff\xfe\x00\x02" * (MIB // 4)),
    ("1 MiB of restart markers", b"\xff\xd8" + b"\xff\xd0" * (MIB // 2)),
    ("a PNG signature, then 1 MiB of 0xFF", b"\x89PNG\r\n\x1a\n" + b"\xff" * MIB),
])
def test_hostile_compressed_headers_are_refused_as_undecodable_in_bounded_time(name, data):
    """Issue 29: 1 MiB of 0xFF cost 126 ms of Python header scanning (4 MiB: 505 ms)."""
    import time
    msg = CompressedImage(format="jpeg", data=data)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        with pytest.raises(ImageConversionError) as error:
            compressed_to_rgb(msg, 84)
        times.append(time.perf_counter() - started)
        assert error.value.kind == "undecodable", name
    assert sorted(times)[2] < 0.05, (name, times)    # measured: under 2 ms


def test_fill_bytes_before_a_marker_are_skipped_and_a_long_header_is_refused():
    from oxygen_ros.ros.image_conversion import MAX_HEADER_SEGMENTS, compressed_size
    filled = GOOD_JPEG[:SOF] + b"\xff" * 5000 + GOOD_JPEG[SOF:]
    assert compressed_size(filled) == ("jpeg", 64, 48)
    assert compressed_to_rgb(CompressedImage(format="jpeg", data=filled)).shape == (48, 64, 3)
    comments = b"\xff\xfe\x00\x04hi"
    fits = GOOD_JPEG[:2] + comments * (MAX_HEADER_SEGMENTS - 10) + GOOD_JPEG[2:]
    assert compressed_size(fits) == ("jpeg", 64, 48)
    too_long = GOOD_JPEG[:2] + comments * MAX_HEADER_SEGMENTS + GOOD_JPEG[2:]
    with pytest.raises(ImageConversionError) as error:
        compressed_size(too_long)
    assert error.value.kind == "undecodable"


def test_the_hostile_images_tool_meets_each_case_as_bad_input_md_says():
    """tools/hostile_images.py (whose times docs/bad-input.md gives) converts each of its
    cases with the outcome the doc's table names."""
    script = Path(__file__).resolve().parents[2] / "tools" / "hostile_images.py"
    printed = subprocess.run([sys.executable, str(script), "--repeats", "1"], check=True,
                             capture_output=True, text=True, timeout=120).stdout
    outcomes = [line.split()[-2] for line in printed.splitlines()[1:]]
    assert outcomes == ["undecodable", "undecodable", "512x512x3", "4096x4096x3",
                        "4096x4096x3"]
