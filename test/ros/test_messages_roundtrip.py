"""Every custom message survives a trip to another process and back over DDS, field for field."""

import time

import numpy as np
from oxygen_ros.msg import ActionChunk, DialogueChunk, MemorySummary, Observation
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import Image

from oxygen_ros.ros import qos
from oxygen_ros.ros.image_conversion import rgb_to_image


def observation() -> Observation:
    rng = np.random.default_rng(0)
    msg = Observation(camera_names=["base", "left_wrist"], instruction="pick up the cup — 杯子")
    msg.header.stamp.sec, msg.header.stamp.nanosec = 1_700_000_000, 123_456_789
    msg.header.frame_id = "base_link"
    msg.images = [rgb_to_image(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8), Image,
                               msg.header.stamp, name) for name in msg.camera_names]
    msg.state.name = ["shoulder", "elbow"]
    msg.state.position, msg.state.velocity, msg.state.effort = [0.5, -1.25], [0.1, 0.2], [3.0, 4.0]
    return msg


def action_chunk() -> ActionChunk:
    actions = np.arange(50 * 7, dtype=np.float32) / 7.0
    # dt is float32 on the wire: send a value float32 represents exactly.
    msg = ActionChunk(frame_id=2**40 + 7, horizon=50, action_dim=7, dt=float(np.float32(0.02)),
                      joint_names=[f"j{i}" for i in range(7)], actions=actions.tolist())
    msg.header.stamp.sec = 42
    return msg


def dialogue_chunk() -> DialogueChunk:
    return DialogueChunk(request_id=2**63 + 5, seq=17, text="hello, wörld\n", final=True,
                         finish_reason="timeout")


def memory_summary() -> MemorySummary:
    msg = MemorySummary(text="the cup moved to the left\n" * 20)
    msg.window_start.sec, msg.window_end.sec, msg.window_end.nanosec = 10, 20, 999_999_999
    return msg


CASES = {"observation": (Observation, observation), "action_chunk": (ActionChunk, action_chunk),
         "dialogue_chunk": (DialogueChunk, dialogue_chunk),
         "memory_summary": (MemorySummary, memory_summary)}




def test_each_message_round_trips_between_processes(processes, rclpy_context, spin_until):
    echo = processes.python("test/ros/nodes/echo.py")
    deadline = time.monotonic() + 30
    while "echo ready" not in "".join(echo.lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "echo ready" in "".join(echo.lines), "".join(echo.lines)

    node = Node("roundtrip_test", context=rclpy_context)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(node)
    received = {}
    publishers = {}
    for name, (msg_type, _) in CASES.items():
        publishers[name] = node.create_publisher(msg_type, f"/roundtrip/{name}", qos.RELIABLE)
        node.create_subscription(msg_type, f"/roundtrip/{name}/echo",
                                 lambda msg, name=name: received.setdefault(name, msg),
                                 qos.RELIABLE)
    sent = {name: make() for name, (_, make) in CASES.items()}

    def all_back() -> bool:
        for name, publisher in publishers.items():
            if name not in received:
                publisher.publish(sent[name])
        return len(received) == len(CASES)

    assert spin_until(executor, all_back, timeout_s=20.0), f"echoed only {sorted(received)}"
    for name in CASES:
        assert received[name] == sent[name], name
    # spot-check decoded payloads, not only message equality
    assert list(received["observation"].images[1].data) == list(sent["observation"].images[1].data)
    np.testing.assert_array_equal(np.array(received["action_chunk"].actions, np.float32),
                                  np.arange(350, dtype=np.float32) / 7.0)
    executor.remove_node(node)
    node.destroy_node()
