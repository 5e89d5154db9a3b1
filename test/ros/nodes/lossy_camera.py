"""Child process for the lost-frames test: a camera on UDP alone (its DDS profile), raw
frames too large for it. Small frames until 'pause' on stdin, then 'paused'; on 'go', 20
frames of 1280x960 and 5 small ones, then 'sent 25'; alive until killed."""

import sys
import threading
import time

import numpy as np
import rclpy
from rclpy.node import Node
from sensor_msgs.msg import Image

from oxygen_ros.ros import qos
from oxygen_ros.ros.image_conversion import rgb_to_image

BIG, SMALL = (960, 1280), (48, 64)


def main() -> None:
    rclpy.init()
    node = Node("lossy_camera")
    publisher = node.create_publisher(Image, "/cameras/base/image_raw", qos.SENSOR)
    frames = {size: np.random.default_rng(0).integers(0, 256, (*size, 3), dtype=np.uint8)
              for size in (BIG, SMALL)}

    def send(size) -> None:
        publisher.publish(rgb_to_image(frames[size], Image, node.get_clock().now().to_msg(),
                                       "base"))

    lines = iter(sys.stdin.readline, "")
    paused = threading.Event()
    threading.Thread(target=lambda: (next(lines), paused.set()), daemon=True).start()
    while not paused.wait(0.2):
        send(SMALL)
    print("paused", flush=True)
    next(lines)
    for size in [BIG] * 20 + [SMALL] * 5:
        send(size)
        time.sleep(0.25)
    print("sent 25", flush=True)
    while True:
        time.sleep(1.0)


if __name__ == "__main__":
    main()
