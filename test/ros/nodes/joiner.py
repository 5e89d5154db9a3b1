"""Child process for the participants test: DDS participants that join the graph, look at
the inference node as the ros2 CLI does (node and topic lists, its parameters, a short
subscription to its commands), and leave again, one after another.

`joiner.py DOMAIN VISITS FIRST` is a lane: VISITS visits in turn, each in its own process
as each `ros2` command is; `joiner.py visit DOMAIN INDEX` is one visit. A visit prints its
verdict before it tears down. Its process then has EXIT_S to end: Jazzy's Fast DDS has hung
in a participant's teardown and in the interpreter's exit (seen under load, not
reproduced), which is the visitor's trouble, not the node's; such a visit is killed, as a
stuck ros2 command would be, the lane says so and goes on. The lane itself never loads
rclpy, so its own exit cannot hang there."""

import faulthandler
import signal
import subprocess
import sys
import time

EXIT_S = 20.0


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


def visit(index: int, domain: int) -> None:
    """One participant's life; its verdict is ok when it found the inference node, its
    parameters and its commands. Each phase's seconds are printed as it ends, for the
    test's message when one hangs."""
    import rclpy
    from rcl_interfaces.srv import GetParameters, ListParameters
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import Float64MultiArray

    from oxygen_ros.ros import qos

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
    ok = False
    try:
        if listing.wait_for_service(timeout_sec=20.0):
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
            ok = bool(names) and got is not None and len(commands) >= 5
    finally:
        print(f"visit {index}: {'ok' if ok else 'failed'}", flush=True)
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
        phase("leave")


def lane(domain: int, visits: int, first: int) -> None:
    """The visits one after another, each in its own process; a visit that ends without
    a verdict (it raised, or crashed) is reported failed."""
    for index in range(first, first + visits):
        child = subprocess.Popen([sys.executable, __file__, "visit", str(domain), str(index)],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        verdict = False
        for line in child.stdout:
            print(line, end="", flush=True)
            if line.startswith("visit "):
                verdict = True
                break
        try:
            rest, _ = child.communicate(timeout=EXIT_S)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGUSR1)
            time.sleep(1.0)                       # for its stack to be written
            child.kill()
            rest, _ = child.communicate()
            rest += f"  {index} killed: still running {EXIT_S:.0f} s after its verdict\n"
        print(rest, end="", flush=True)
        if not verdict:
            print(f"visit {index}: failed (no verdict, exit {child.returncode})", flush=True)


def main() -> int:
    faulthandler.register(signal.SIGUSR1, all_threads=True)     # the test asks where it hangs
    if sys.argv[1] == "visit":
        visit(int(sys.argv[3]), int(sys.argv[2]))
    else:
        lane(*(int(a) for a in sys.argv[1:4]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
