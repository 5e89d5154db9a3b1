"""sensor_msgs Image / CompressedImage <-> numpy RGB arrays, and resizing to the model size.

Whatever a message holds, the result is an RGB array or an ImageConversionError naming the
kind of problem: unsupported_encoding, wrong_size, undecodable, empty_image, too_large
(more pixels than allowed — checked from the header, before anything is decoded),
degenerate_aspect (one side far longer than the other). JPEGs are decoded at the smallest
scale that still covers the model resolution (libjpeg's DCT scaling), so HD cameras cost
little more than small ones.
"""

import re
import struct

import cv2
import numpy as np

from oxygen_ros.ros.node_parameters import MAX_PIXELS

try:  # cv_bridge is used where a ROS 2 install provides it; the numpy path is the fallback.
    from cv_bridge import CvBridge
    _BRIDGE = CvBridge()
except ImportError:
    _BRIDGE = None

# encoding -> (channels, dtype, cv2 conversion to RGB or None)
ENCODINGS = {
    "rgb8": (3, np.uint8, None),
    "bgr8": (3, np.uint8, cv2.COLOR_BGR2RGB),
    "rgba8": (4, np.uint8, cv2.COLOR_RGBA2RGB),
    "bgra8": (4, np.uint8, cv2.COLOR_BGRA2RGB),
    "mono8": (1, np.uint8, cv2.COLOR_GRAY2RGB),
    "mono16": (1, np.uint16, cv2.COLOR_GRAY2RGB),
    # 4:2:2, two bytes a pixel (BT.601): ROS's yuv422 is UYVY, yuv422_yuy2 is YUYV
    "yuv422": (2, np.uint8, cv2.COLOR_YUV2RGB_UYVY),
    "uyvy": (2, np.uint8, cv2.COLOR_YUV2RGB_UYVY),
    "yuv422_yuy2": (2, np.uint8, cv2.COLOR_YUV2RGB_YUYV),
    "yuyv": (2, np.uint8, cv2.COLOR_YUV2RGB_YUYV),
}
BRIDGED = {"rgb8", "bgr8", "rgba8", "bgra8", "mono8"}    # what cv_bridge decodes here


MAX_ASPECT = 16.0               # a longer side more than this times the shorter one
MAX_HEADER_SEGMENTS = 64        # markers before the frame header; real JPEGs have under 20
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_FILL = re.compile(rb"\xff+")    # a marker and the fill bytes any marker may follow
_START_OF_FRAME = frozenset((0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB,
                             0xCD, 0xCE, 0xCF))
REDUCED_FLAGS = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2,
                 4: cv2.IMREAD_REDUCED_COLOR_4, 8: cv2.IMREAD_REDUCED_COLOR_8}


class ImageConversionError(ValueError):
    """An image message that cannot be turned into an RGB array (the message says why;
    `kind` names the class of problem for counting and logging)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def check_dimensions(width: int, height: int, max_pixels: int = MAX_PIXELS) -> None:
    """Raise unless an image of width x height is worth decoding."""
    if width <= 0 or height <= 0:
        raise ImageConversionError("empty_image", f"empty image {width}x{height}")
    if width * height > max_pixels:
        raise ImageConversionError("too_large", f"{width}x{height} = {width * height} pixels "
                                                f"> the limit of {max_pixels}")
    if max(width, height) > MAX_ASPECT * min(width, height):
        raise ImageConversionError("degenerate_aspect", f"{width}x{height}: one side is more "
                                                        f"than {MAX_ASPECT:g}x the other")


def image_to_rgb(msg, max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """Decode a sensor_msgs/Image into an (H, W, 3) uint8 RGB array (mono16 keeps the top
    byte; YUV 4:2:2 is converted as BT.601 video range, as OpenCV and cv_bridge do)."""
    if msg.encoding not in ENCODINGS:
        raise ImageConversionError(
            "unsupported_encoding",
            f"unsupported encoding {msg.encoding!r} (supported: {', '.join(ENCODINGS)})")
    check_dimensions(msg.width, msg.height, max_pixels)
    channels, dtype, code = ENCODINGS[msg.encoding]
    itemsize = np.dtype(dtype).itemsize
    row_bytes = msg.width * channels * itemsize
    if channels == 2 and msg.width % 2:
        raise ImageConversionError("wrong_size", f"{msg.encoding} pairs pixels: its width "
                                                 f"must be even, not {msg.width}")
    if msg.step < row_bytes:
        raise ImageConversionError(
            "wrong_size",
            f"step {msg.step} < width {msg.width} x {channels} channels x {itemsize} bytes")
    if len(msg.data) < msg.step * msg.height:
        raise ImageConversionError(
            "wrong_size", f"{len(msg.data)} data bytes < step {msg.step} x height {msg.height}")
    if _BRIDGE is not None and msg.encoding in BRIDGED:
        return np.ascontiguousarray(_BRIDGE.imgmsg_to_cv2(msg, desired_encoding="rgb8"))
    raw = np.frombuffer(msg.data, dtype=np.uint8, count=msg.step * msg.height)
    rows = raw.reshape(msg.height, msg.step)[:, :row_bytes]
    order = ">" if msg.is_bigendian else "<"
    pixels = np.ascontiguousarray(rows).view(np.dtype(dtype).newbyteorder(order))
    pixels = pixels.reshape(msg.height, msg.width, channels)
    if dtype == np.uint16:
        pixels = (pixels.astype(np.uint16) >> 8).astype(np.uint8)
    if code is None:
        return np.ascontiguousarray(pixels)
    return cv2.cvtColor(pixels, code)


def compressed_size(data: bytes) -> tuple[str, int, int]:
    """(format, width, height) read from a JPEG or PNG header, without decoding. The cost is
    bounded whatever the bytes: fill bytes are skipped by the regex engine and at most
    MAX_HEADER_SEGMENTS markers are read before the frame header."""
    if data[:8] == PNG_SIGNATURE:
        if len(data) < 24 or data[12:16] != b"IHDR":
            raise ImageConversionError("undecodable", "PNG without an IHDR header")
        width, height = struct.unpack(">II", data[16:24])
        return "png", width, height
    if data[:2] == b"\xff\xd8":
        return ("jpeg",) + _jpeg_frame_size(data)
    raise ImageConversionError("unsupported_encoding",
                               "compressed image is neither JPEG nor PNG")


def _jpeg_frame_size(data: bytes) -> tuple[int, int]:
    at = 2
    for _ in range(MAX_HEADER_SEGMENTS):
        fill = _FILL.match(data, at)
        if fill is None or fill.end() + 3 > len(data):
            break
        at = fill.end() - 1                   # the last 0xFF of the run, before the marker
        marker = data[at + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:   # no length field
            at += 2
            continue
        if marker in _START_OF_FRAME and at + 9 <= len(data):
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return width, height
        at += 2 + struct.unpack(">H", data[at + 2:at + 4])[0]
    raise ImageConversionError("undecodable", "JPEG without a readable frame header")


def reduction(width: int, height: int, size: int, mode: str = "pad") -> int:
    """The largest JPEG scale-down (1, 2, 4, 8) that still covers size x size after resize:
    the longer side for pad, the shorter one for stretch."""
    side = max(width, height) if mode == "pad" else min(width, height)
    return max((f for f in REDUCED_FLAGS if side // f >= size), default=1)


def compressed_to_rgb(msg, size: int = 0, mode: str = "pad",
                      max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """Decode a JPEG/PNG sensor_msgs/CompressedImage into an (H, W, 3) uint8 RGB array. With
    a model `size`, JPEGs are decoded scaled down as far as that still covers it."""
    data = bytes(msg.data)
    if not data:
        raise ImageConversionError("empty_image", "empty compressed image")
    kind, width, height = compressed_size(data)
    check_dimensions(width, height, max_pixels)
    factor = reduction(width, height, size, mode) if size and kind == "jpeg" else 1
    bgr = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), REDUCED_FLAGS[factor])
    if bgr is None:
        raise ImageConversionError("undecodable",
                                   f"cannot decode compressed image (format {msg.format!r})")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def rgb_to_image(image: np.ndarray, msg_type, stamp=None, frame_id: str = ""):
    """Wrap an (H, W, 3) uint8 RGB array in a sensor_msgs/Image of type msg_type."""
    msg = msg_type()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(image.shape[0]), int(image.shape[1])
    msg.encoding = "rgb8"
    msg.is_bigendian = 0
    msg.step = msg.width * 3
    msg.data = np.ascontiguousarray(image, dtype=np.uint8).tobytes()
    return msg

