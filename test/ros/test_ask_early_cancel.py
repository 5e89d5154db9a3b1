"""An Ask goal cancelled after it was accepted but before the router took it in ends
cancelled and gives its place back (real rclpy, one process). rclpy answers the client
before it calls the accepted callback, so a client's cancel can come in between; here the
router's accepted callback is held back until the cancel has been answered, so the test does
not depend on which of the two the executor happens to run first."""

import threading
import time

from graph_helpers import write_params
from rclpy.action import ActionClient
from rclpy.node import Node

from oxygen_ros.action import Ask
from oxygen_ros.ros.executor import YieldingMultiThreadedExecutor
from oxygen_ros.ros.inference_node import InferenceNode

CANCELED = 5        # action_msgs/GoalStatus STATUS_CANCELED


def wait(until, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not until() and time.monotonic() < deadline:
        time.sleep(0.02)
    return until()


def test_a_goal_cancelled_before_it_executes_ends_cancelled_and_frees_its_place(
        rclpy_context, tmp_path):
    params = write_params(tmp_path / "params.yaml",
                          inference={"max_pending_requests": 2, "stop_at_eos": False})
    node = InferenceNode(context=rclpy_context,
                         cli_args=["--ros-args", "--params-file", str(params)])
    port, engine = node.ports[""], node.engine
    accepted = []           # goal handles accepted, their execution held back
    port.dialogue.server.register_handle_accepted_callback(accepted.append)
    asker = Node("asker", context=rclpy_context)
    client = ActionClient(asker, Ask, "/oxygen/ask")
    executor = YieldingMultiThreadedExecutor(num_threads=3, context=rclpy_context)
    executor.add_node(node)
    executor.add_node(asker)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        assert client.wait_for_server(timeout_sec=60.0)
        sent = client.send_goal_async(Ask.Goal(question="what do you see?", max_tokens=40))
        assert wait(sent.done), "the goal was never answered"
        handle = sent.result()
        assert handle.accepted
        # rclpy answers the client before it calls the accepted callback
        assert wait(lambda: len(accepted) == 1), accepted
        assert engine.pending_dialogue_of("") == 1          # its place is held

        cancelling = handle.cancel_goal_async()
        assert wait(cancelling.done), "the cancel was never answered"
        assert [bytes(g.goal_id.uuid) for g in cancelling.result().goals_canceling] == \
            [bytes(handle.goal_id.uuid)]
        assert port.counters["dialogue_requests"] == 0       # not submitted yet

        port.dialogue.on_accepted(accepted[0])   # what the router's accepted callback does
        result = handle.get_result_async()
        assert wait(result.done), "no result for the cancelled goal"
        assert result.result().status == CANCELED
        assert result.result().result.finish_reason == "cancelled"
        assert result.result().result.answer == ""
        assert wait(lambda: engine.pending_dialogue_of("") == 0), \
            engine.pending_dialogue_of("")                   # the place came back
        assert port.counters["dialogue_requests"] == 1
        assert wait(lambda: port.counters["dialogue_cancelled"] == 1), port.counters
    finally:
        executor.shutdown(timeout_sec=2.0)
        client.destroy()
        asker.destroy_node()
        node.destroy_node()
