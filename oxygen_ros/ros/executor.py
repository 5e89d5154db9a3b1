"""A MultiThreadedExecutor that keeps timers on time with the rclpy 9.1.2 / 7.1.6 wheels."""

import time

from rclpy.executors import MultiThreadedExecutor


class YieldingMultiThreadedExecutor(MultiThreadedExecutor):
    """MultiThreadedExecutor that yields the GIL after dispatching each callback.

    Upstream rclpy before 10.0.4 (ros2/rclpy#1452) lets the dispatching thread hog the GIL
    while a subscription is busy, starving timers (50 Hz timers measured at 2-40 Hz).
    Yielding after every dispatch gives the worker threads their turn.
    """

    def _spin_once_impl(self, *args, **kwargs):
        super()._spin_once_impl(*args, **kwargs)
        time.sleep(0)
