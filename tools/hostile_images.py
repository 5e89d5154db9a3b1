"""What a hostile compressed image costs camera_ingest: the time its conversion takes to
refuse or decode each case docs/bad-input.md names, on this machine.

    .venv/bin/python tools/hostile_images.py

Prints one row per case: its size in bytes, the outcome (the drop counter's name, or the
decoded shape) and the median time of --repeats conversions at the model size --size.
"""

import argparse
import statistics
import time

import cv2
import numpy as np
from sensor_msgs.msg import CompressedImage

from oxygen_ros.ros.image_conversion import ImageConversionError, compressed_to_rgb


def cases() -> dict:
    fill = lambda mib: b"\xff\xd8" + b"\xff" * (mib << 20)   # noqa: E731
    big = np.zeros((4096, 4096, 3), np.uint8)
    return {
        "1 MiB of 0xFF labelled jpeg": ("jpeg", fill(1)),
        "4 MiB of 0xFF labelled jpeg": ("jpeg", fill(4)),
        "4096x4096 JPEG": ("jpeg", cv2.imencode(".jpg", big)[1].tobytes()),
        "4096x4096 PNG of zeros": ("png", cv2.imencode(".png", big)[1].tobytes()),
        "4096x4096 16-bit RGBA PNG of zeros":
            ("png", cv2.imencode(".png", np.zeros((4096, 4096, 4), np.uint16))[1].tobytes()),
    }


def convert(msg, size: int) -> str:
    try:
        return "x".join(map(str, compressed_to_rgb(msg, size).shape))
    except ImageConversionError as error:
        return error.kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=224, help="model image size (default 224)")
    parser.add_argument("--repeats", type=int, default=5, help="conversions per case (default 5)")
    args = parser.parse_args()
    print(f"{'case':38} {'bytes':>10} {'outcome':>16} {'median ms':>10}")
    for name, (form, data) in cases().items():
        msg = CompressedImage(format=form, data=data)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            outcome = convert(msg, args.size)
            times.append(time.perf_counter() - start)
        print(f"{name:38} {len(data):>10} {outcome:>16} {statistics.median(times) * 1e3:>10.1f}")


if __name__ == "__main__":
    main()
