"""Entry-point helper: init rclpy, spin nodes until SIGINT or SIGTERM, clean up, exit 0.

rclpy's own signal handlers are off: a shell's Ctrl-C reaches every process of the group,
and `ros2 launch` forwards its own SIGINT too, so a node may be signalled twice, even
while it is being destroyed. Here any number of SIGINT/SIGTERM only set a flag; the main
thread then stops spinning, destroys the nodes (joining the engine thread before the
interpreter goes away) and returns 0 — no traceback, no abort.

Before the executor stops, a node with wind_down()/winding_down() (the inference node: its
open Ask goals end with finish_reason shutdown) is spun until it has answered what it
still owes, at most WIND_DOWN_S."""

import signal
import sys
import threading
import time
from typing import Callable, Optional, Sequence

import rclpy
from rclpy.executors import Executor, SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.signals import SignalHandlerOptions

WIND_DOWN_S = 1.0      # at most this long answering open requests after a stop signal
FLUSH_S = 0.2          # then this long for the executor to send what they handed over


def install_stop_signals() -> threading.Event:
    """SIGINT and SIGTERM set the returned event (as often as they come)."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def ignore_stop_signals() -> None:
    """From here on SIGINT/SIGTERM are ignored: Python restores the default handlers (which
    kill the process) while it finalizes, but keeps an explicit ignore."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)


def spin_until(executor: Executor, stop: threading.Event, duration: float = 0.0,
               every_second: Optional[Callable[[float], bool]] = None) -> None:
    """Spin until `stop` is set, `duration` seconds pass (0: no limit) or every_second(elapsed),
    called once a second, returns False."""
    start = next_second = time.monotonic()
    while not stop.is_set() and rclpy.ok(context=executor.context):
        executor.spin_once(timeout_sec=0.1)
        now = time.monotonic()
        if duration and now - start >= duration:
            return
        if every_second is not None and now >= next_second + 1.0:
            next_second += 1.0
            if every_second(next_second - start) is False:
                return


def wind_down(executor: Executor, nodes: Sequence[object]) -> None:
    """Let nodes end open requests (wind_down(): how many it ended) and spin until they
    have answered them (winding_down() False) or WIND_DOWN_S passes, then FLUSH_S more:
    the action server sends a result from a task it starts after the execute callback."""
    owing = [node for node in nodes if hasattr(node, "wind_down")]
    ended = sum(node.wind_down() for node in owing)
    deadline = time.monotonic() + WIND_DOWN_S
    while any(node.winding_down() for node in owing) and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.02)
    flush_until = time.monotonic() + (FLUSH_S if ended else 0.0)
    while time.monotonic() < flush_until:
        executor.spin_once(timeout_sec=0.02)


def run_nodes(factories: Sequence[Callable[[], object]], args=None,
              make_executor: Optional[Callable[[], Executor]] = None,
              duration: float = 0.0) -> int:
    """Build the nodes (arguments rcl cannot read, or a failure, are one line on stderr and
    exit code 1), spin them until a signal or `duration`, destroy them; 0 on a clean
    stop."""
    try:
        rclpy.init(args=args if args is not None else sys.argv,
                   signal_handler_options=SignalHandlerOptions.NO)
    except (_rclpy.RCLError, _rclpy.UnknownROSArgsError) as error:   # arguments rcl cannot
        # read: a broken params file, a misspelt --ros-args flag
        unknown = isinstance(error, _rclpy.UnknownROSArgsError)
        print(f"{', '.join(getattr(f, '__name__', 'node') for f in factories)}: "
              f"{'unknown ROS arguments ' if unknown else ''}{error}", file=sys.stderr)
        return 1
    stop = install_stop_signals()
    nodes = []
    try:
        for factory in factories:
            nodes.append(factory())
    except Exception as error:  # bad parameters or checkpoint: the message says which
        ignore_stop_signals()
        print(f"{getattr(factory, '__name__', 'node')}: {error}", file=sys.stderr)
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
        return 1
    executor = make_executor() if make_executor else SingleThreadedExecutor()
    for node in nodes:
        executor.add_node(node)
    try:
        spin_until(executor, stop, duration)
        wind_down(executor, nodes)
    finally:
        ignore_stop_signals()
        executor.shutdown(timeout_sec=2.0)
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


def run_node(node_class, args=None, make_executor=None) -> int:
    """One node's main(); make_executor() builds the executor (default single-threaded)."""
    return run_nodes([node_class], args, make_executor)
