"""Ingest benchmark: what one camera frame costs camera_ingest (decode + resize to the
model), raw and JPEG, at 480p, 720p and 1080p, full-size vs reduced JPEG decoding, side
by side in one run."""

import cv2
from sensor_msgs.msg import CompressedImage, Image

from oxygen_ros.bench.report import median_ms
from oxygen_ros.model.letterbox import resize_rgb
from oxygen_ros.ros.image_conversion import (
    compressed_to_rgb,
    image_to_rgb,
    reduction,
    rgb_to_image,
)
from oxygen_ros.demo.world import TabletopWorld

RESOLUTIONS = {"480p": (640, 480), "720p": (1280, 720), "1080p": (1920, 1080)}


def run(size: int = 112, mode: str = "pad", repeats: int = 20) -> list[dict]:
    rows = []
    for name, (width, height) in RESOLUTIONS.items():
        frame = TabletopWorld(0).frame(0, 0.5, height, width)
        raw = rgb_to_image(frame, Image)
        jpeg = CompressedImage(format="jpeg", data=cv2.imencode(
            ".jpg", cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))[1].tobytes())
        rows.append({
            "resolution": name, "model_size": size,
            "raw_ms": median_ms(lambda: resize_rgb(image_to_rgb(raw), size, mode), repeats,
                                warm=True),
            "jpeg_full_ms": median_ms(
                lambda: resize_rgb(compressed_to_rgb(jpeg), size, mode), repeats, warm=True),
            "jpeg_reduced_ms": median_ms(
                lambda: resize_rgb(compressed_to_rgb(jpeg, size, mode), size, mode), repeats,
                warm=True),
            "jpeg_scale": reduction(width, height, size, mode),
        })
    return rows


def table(rows: list[dict]) -> str:
    lines = [f"{'camera':<8} {'raw':>9} {'JPEG full':>10} {'JPEG reduced':>13} {'scale':>6} "
             f"{'speedup':>8}   (ms per frame: decode + resize to {rows[0]['model_size']} px)"]
    for row in rows:
        lines.append(f"{row['resolution']:<8} {row['raw_ms']:>9.2f} {row['jpeg_full_ms']:>10.2f} "
                     f"{row['jpeg_reduced_ms']:>13.2f} {'1/' + str(row['jpeg_scale']):>6} "
                     f"{row['jpeg_full_ms'] / row['jpeg_reduced_ms']:>7.1f}x")
    return "\n".join(lines)
