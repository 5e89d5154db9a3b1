"""Entry-point helper: init rclpy, spin one node until Ctrl-C or shutdown, clean up."""

import sys

import rclpy
from rclpy.executors import ExternalShutdownException


def run_node(node_class, args=None, make_executor=None) -> int:
    """make_executor() builds the executor after rclpy.init (default: single-threaded)."""
    rclpy.init(args=args if args is not None else sys.argv)
    node = node_class()
    try:
        rclpy.spin(node, executor=make_executor() if make_executor else None)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
