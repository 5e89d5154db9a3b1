"""The control timer holds its rate while subscriptions fire and the engine is busy
(the rclpy 9.1.2 MultiThreadedExecutor starves timers; the node's executor must not)."""

import threading
import time

import numpy as np
from oxygen_ros.msg import Observation
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_msgs.msg import String

from oxygen_ros.ros import qos
from oxygen_ros.ros.executor import YieldingMultiThreadedExecutor
from oxygen_ros.ros.image_conversion import rgb_to_image
from oxygen_ros.ros.inference_node import InferenceNode


def test_control_timer_holds_50_hz_with_busy_engine_and_busy_subscriptions(rclpy_context):
    # the small preset keeps the engine thread busy: ~0.2-0.4 s of model work per frame
    args = ["--ros-args", "-p", "preset:=small", "-p", "dry_run:=false", "-p",
            "frame_period_s:=0.5", "-p", "watchdog_ticks:=100", "-p", "memory_period_s:=1.0"]
    context = rclpy_context
    node = InferenceNode(context=context, cli_args=args)
    feeder = Node("feeder", context=context)
    observations = feeder.create_publisher(Observation, "/oxygen/observation", qos.RELIABLE)
    requests = feeder.create_publisher(String, "/oxygen/dialogue/request", qos.RELIABLE_DEEP)
    executor = YieldingMultiThreadedExecutor(num_threads=3, context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()

    rng = np.random.default_rng(0)
    stop = threading.Event()

    def feed():  # 30 Hz observations (3 x 112 px images) and a dialogue request every 0.5 s
        count = 0
        while not stop.wait(1 / 30):
            msg = Observation(camera_names=["base", "left_wrist", "right_wrist"])
            msg.header.stamp = feeder.get_clock().now().to_msg()
            msg.images = [rgb_to_image(rng.integers(0, 256, (112, 112, 3), dtype=np.uint8),
                                       Image, msg.header.stamp, c) for c in msg.camera_names]
            msg.state.name = [f"joint_{i}" for i in range(14)]
            msg.state.position = rng.uniform(-1, 1, 14).tolist()
            observations.publish(msg)
            count += 1
            if count % 15 == 0:
                requests.publish(String(data="what is happening?"))

    feeder_thread = threading.Thread(target=feed, daemon=True)
    feeder_thread.start()
    try:
        deadline = time.monotonic() + 30
        while node.engine.counters["frames"] < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert node.engine.counters["frames"] >= 3, "the engine never ran"
        start_count, start = len(node._command_times), time.monotonic()
        tokens = node.engine.counters["tokens"]
        time.sleep(4.0)
        times = [t for t in node._command_times if t >= start]
        rate = (len(times) - 1) / (times[-1] - times[0])
        gaps = np.diff(times)
        assert 47.5 <= rate <= 52.5, rate
        assert gaps.max() < 0.1, gaps.max()                   # never starved
        assert node.engine.counters["tokens"] > tokens        # language ran meanwhile
        assert node.counters["observations"] > 60             # subscriptions fired
        assert len(node._command_times) > start_count
    finally:
        stop.set()
        feeder_thread.join()
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        feeder.destroy_node()


def test_shutdown_stops_the_engine_thread(rclpy_context):
    node = InferenceNode(context=rclpy_context, cli_args=["--ros-args", "-p", "preset:=tiny",
                                                           "-p", "joint_names:=['a']",
                                                           "-p", "joint_lower_limits:=[-1.0]",
                                                           "-p", "joint_upper_limits:=[1.0]"])
    assert node._thread.is_alive()
    node.destroy_node()
    assert not node._thread.is_alive()
