"""Camera frames to the model's square input: letterboxed like π0.5's resize_with_pad, or
stretched. camera_ingest resizes with it, and the demo's trainer does the same."""

import cv2
import numpy as np


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
        new_height, new_width = max(1, int(height / ratio)), max(1, int(width / ratio))
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
