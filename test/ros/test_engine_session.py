"""An engine's outputs reach the robot ports only while its configure lasts: a frame that
outlives the teardown's join (a full-size model on a CPU) neither fails on the ports that
went nor publishes through the next configure's (real rclpy, one process)."""

import threading
import time

import numpy as np
from graph_helpers import write_params
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.node import Node

from oxygen_ros.engine.outputs import ActionChunk, MemorySummary
from oxygen_ros.msg import ActionChunk as ActionChunkMsg
from oxygen_ros.msg import MemorySummary as MemorySummaryMsg
from oxygen_ros.ros import qos
from oxygen_ros.ros.engine_session import EngineSession
from oxygen_ros.ros.inference_node import InferenceNode


def test_a_session_delivers_until_it_ends_and_its_end_waits_for_a_delivery():
    session, got = EngineSession(), []
    deliver = session.deliver(got.append)
    deliver(1)
    entered, release = threading.Event(), threading.Event()
    slow = session.deliver(lambda item: (entered.set(), release.wait(60.0), got.append(item)))
    frame = threading.Thread(target=slow, args=(2,))
    frame.start()
    assert entered.wait(60.0)
    ending = threading.Thread(target=lambda: (session.end(), got.append("ended")))
    ending.start()
    release.set()
    ending.join(60.0)
    frame.join(60.0)
    deliver(3)
    assert got == [1, 2, "ended"]     # end() returned once the delivery in progress was over


def test_a_frame_that_outlives_its_configure_reaches_no_port(rclpy_context, tmp_path):
    # no observation is ever published: the engines make no chunk of their own
    node = InferenceNode(context=rclpy_context, cli_args=[
        "--ros-args", "--params-file", str(write_params(tmp_path / "params.yaml"))])
    probe = Node("probe", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(probe)
    heard = []
    for kind, topic in ((ActionChunkMsg, "/oxygen/action_chunk"),
                        (MemorySummaryMsg, "/oxygen/memory")):
        probe.create_subscription(kind, topic, heard.append, qos.RELIABLE)

    def spin(seconds: float, until=lambda: False) -> bool:
        deadline = time.monotonic() + seconds
        while not until() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        return until()

    def matched(port) -> bool:   # a message published now reaches the probe
        return (port.chunk_pub.get_subscription_count() >= 1
                and port.memory_pub.get_subscription_count() >= 1)

    try:
        old, port = node.engine, node.ports[""]
        late = ActionChunk(frame_id=10**6, stamp=old.clock.now(),
                           actions=np.zeros((4, 6), np.float32), latency_s=11.0, late=False)
        summary = MemorySummary(0.0, 1.0, "picked up the cup", frames=3)
        assert spin(60.0, lambda: matched(port))
        old.on_chunk(late)                # while its configure lasts: the port takes it
        assert spin(60.0, lambda: len(heard) == 1) and heard[0].frame_id == 10**6
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        old.on_chunk(late)                # no port now: dropped, not an error
        old.on_memory(summary)
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.ports[""] is port and node.engine is not old
        assert spin(60.0, lambda: matched(port))
        old.on_chunk(late)                # the next configure's port: dropped
        old.on_memory(summary)
        assert not port.chunk_latencies   # bound afresh at configure; took none since
        spin(2.0)                         # published here, they would be heard by now
        assert len(heard) == 1, heard
    finally:
        executor.shutdown()
        probe.destroy_node()
        node.destroy_node()
