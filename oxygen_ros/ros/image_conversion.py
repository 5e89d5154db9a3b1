"""sensor_msgs Image / CompressedImage <-> numpy RGB arrays, and resizing to the model size."""

import cv2
import numpy as np

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
}


class ImageConversionError(ValueError):
    """An image message that cannot be turned into an RGB array (the message says why;
    `kind` names the class of problem for counting and logging)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def image_to_rgb(msg) -> np.ndarray:
    """Decode a sensor_msgs/Image into an (H, W, 3) uint8 RGB array (mono16 keeps the top byte)."""
    if _BRIDGE is not None and msg.encoding in ENCODINGS and msg.encoding != "mono16":
        return np.ascontiguousarray(_BRIDGE.imgmsg_to_cv2(msg, desired_encoding="rgb8"))
    if msg.encoding not in ENCODINGS:
        raise ImageConversionError(
            "unsupported_encoding",
            f"unsupported encoding {msg.encoding!r} (supported: {', '.join(ENCODINGS)})")
    channels, dtype, code = ENCODINGS[msg.encoding]
    itemsize = np.dtype(dtype).itemsize
    row_bytes = msg.width * channels * itemsize
    if msg.height == 0 or msg.width == 0:
        raise ImageConversionError("empty_image", f"empty image {msg.width}x{msg.height}")
    if msg.step < row_bytes:
        raise ImageConversionError(
            "wrong_size",
            f"step {msg.step} < width {msg.width} x {channels} channels x {itemsize} bytes")
    if len(msg.data) < msg.step * msg.height:
        raise ImageConversionError(
            "wrong_size", f"{len(msg.data)} data bytes < step {msg.step} x height {msg.height}")
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


def compressed_to_rgb(msg) -> np.ndarray:
    """Decode a JPEG/PNG sensor_msgs/CompressedImage into an (H, W, 3) uint8 RGB array."""
    buffer = np.frombuffer(msg.data, dtype=np.uint8)
    if buffer.size == 0:
        raise ImageConversionError("empty_image", "empty compressed image")
    bgr = cv2.imdecode(buffer, cv2.IMREAD_COLOR)
    if bgr is None:
        raise ImageConversionError("undecodable",
                                   f"cannot decode compressed image (format {msg.format!r})")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def resize_rgb(image: np.ndarray, size: int, mode: str = "pad") -> np.ndarray:
    """To size x size. "pad" keeps the aspect ratio and centers the image on black bars,
    as openpi's and lerobot's resize_with_pad do before π0.5; "stretch" ignores the ratio.
    Area interpolation when shrinking, linear when growing."""
    height, width = image.shape[:2]
    if height == size and width == size:
        return image
    if mode == "stretch":
        new_height, new_width = size, size
    elif mode == "pad":
        ratio = max(width / size, height / size)
        new_height, new_width = int(height / ratio), int(width / ratio)
    else:
        raise ValueError(f"resize mode must be 'pad' or 'stretch', not {mode!r}")
    shrinking = height > new_height or width > new_width
    resized = cv2.resize(image, (new_width, new_height),
                         interpolation=cv2.INTER_AREA if shrinking else cv2.INTER_LINEAR)
    if (new_height, new_width) == (size, size):
        return resized
    canvas = np.zeros((size, size, 3), dtype=np.uint8)
    top, left = (size - new_height) // 2, (size - new_width) // 2
    canvas[top:top + new_height, left:left + new_width] = resized
    return canvas


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

