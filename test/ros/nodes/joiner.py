"""Child process for the participants test: DDS participants that join the graph, look at
the inference node as the ros2 CLI does (node and topic lists, its parameters, a short
subscription to its commands), and leave again, one after another."""

import sys
import time

import rclpy
from rcl_interfaces.srv import GetParameters, ListParameters
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray

from oxygen_ros.ros import qos


def call(executor, client, request, attempts: int = 4, timeout_s: float = 5.0):
    """The response, asking again when none came: Fast DDS drops a response to a client
    the server has not matched yet (as a robust client does, unlike `ros2 param`)."""
    for _ in range(attempts):
        future = client.call_async(request)
        executor.spin_until_future_complete(future, timeout_sec=timeout_s)
        if future.result() is not None:
            return future.result()
        client.remove_pending_request(future)
    return None


def visit(index: int, domain: int) -> bool:
    """One participant's life; True when it found the inference node and its commands.
    Each phase's seconds are printed as it ends, for the test's message when one hangs."""
    clock = [time.monotonic()]

    def phase(name: str) -> None:
        now = time.monotonic()
        print(f"  {index} {name} {now - clock[0]:.2f} s", flush=True)
        clock[0] = now

    context = Context()
    rclpy.init(context=context, domain_id=domain)
    node = Node(f"joiner_{index}", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    commands = []
    node.create_subscription(Float64MultiArray, "/oxygen/joint_command", commands.append,
                             qos.COMMAND)
    listing = node.create_client(ListParameters, "/inference/list_parameters")
    getting = node.create_client(GetParameters, "/inference/get_parameters")
    phase("join")
    try:
        if not listing.wait_for_service(timeout_sec=20.0):
            return False
        phase("service")
        node.get_node_names_and_namespaces()
        node.get_topic_names_and_types()
        listed = call(executor, listing, ListParameters.Request())
        names = list(listed.result.names) if listed else []
        got = call(executor, getting, GetParameters.Request(names=names))
        phase("parameters")
        for _ in range(200):
            if len(commands) >= 5:
                break
            executor.spin_once(timeout_sec=0.05)
        phase("commands")
        return bool(names) and got is not None and len(commands) >= 5
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
        phase("leave")


def main() -> int:
    domain, visits, first = (int(a) for a in sys.argv[1:4])
    for index in range(first, first + visits):
        print(f"visit {index}: {'ok' if visit(index, domain) else 'failed'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
