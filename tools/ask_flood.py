"""Load check from a client's seat: many Ask goals at once against a running inference node,
and what the robot's other outputs did meanwhile.

Start a server and its cameras first, then the flood, in one ROS_DOMAIN_ID:

    .venv/bin/oxygen-ros make-demo-bag build/flood_bag --duration 60
    .venv/bin/oxygen-ros run --preset demo --no-dry-run --duration 150 &
    .venv/bin/oxygen-ros replay build/flood_bag --restamp --wait-for-subscribers 30 &
    .venv/bin/python tools/ask_flood.py --goals 64

It waits for the Ask server and for action chunks, counts chunks for --before-s, sends every
goal at once (one client, ask_client_qos deep), and prints: the finish reasons, each goal's
time to its result (median, max), feedback gaps, fresh chunks per second before and during
the flood, and the deadline misses /diagnostics counted during it. Exit status 1 if a goal
never ended.
"""

import argparse
import statistics
import sys
import time
from collections import Counter

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionClient

from oxygen_ros.action import Ask
from oxygen_ros.msg import ActionChunk
from oxygen_ros.ros import qos
from oxygen_ros.ros.dialogue_router import ask_client_qos


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goals", type=int, default=64, help="goals sent at once (64)")
    parser.add_argument("--question", default="what is in the bin?")
    parser.add_argument("--before-s", type=float, default=5.0,
                        help="seconds of chunks counted before the flood (5)")
    parser.add_argument("--timeout-s", type=float, default=120.0,
                        help="seconds to wait for every result (120)")
    parser.add_argument("--namespace", default="", help="a robot's namespace, e.g. /alpha")
    args = parser.parse_args()
    if args.goals < 1:
        parser.error("--goals must be at least 1")

    rclpy.init()
    node = rclpy.create_node("ask_flood")
    prefix = args.namespace.rstrip("/")
    client = ActionClient(node, Ask, f"{prefix}/oxygen/ask", **ask_client_qos(args.goals))
    chunks, misses = [], {}
    node.create_subscription(ActionChunk, f"{prefix}/oxygen/action_chunk",
                             lambda m: chunks.append(time.monotonic()), qos.RELIABLE)

    def on_diagnostics(msg):
        for status in msg.status:
            if status.name.startswith("oxygen_ros: inference"):
                values = {v.key: v.value for v in status.values}
                if "deadline_misses" in values:
                    misses[status.name] = int(values["deadline_misses"])
    node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, qos.RELIABLE)

    def spin_until(done, timeout_s):
        deadline = time.monotonic() + timeout_s
        while not done() and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
        return done()

    try:
        if not client.wait_for_server(timeout_sec=60.0):
            print("no Ask server within 60 s", file=sys.stderr)
            return 1
        if not spin_until(lambda: chunks and misses, 60.0):
            print("no action chunks or inference diagnostics within 60 s", file=sys.stderr)
            return 1
        start = time.monotonic()
        spin_until(lambda: False, args.before_s)
        before = sum(t >= start for t in chunks) / args.before_s
        misses_before = sum(misses.values())

        goals = []
        sent = time.monotonic()
        for i in range(args.goals):
            goal = {"seqs": [], "end": None, "status": None, "result": None, "accepted": None}

            def on_feedback(msg, goal=goal):
                goal["seqs"].append(msg.feedback.seq)

            def on_response(future, goal=goal):
                handle = future.result()
                goal["accepted"] = handle.accepted
                if not handle.accepted:
                    goal["end"] = time.monotonic()
                    return

                def on_result(result_future, goal=goal):
                    response = result_future.result()
                    goal["status"], goal["result"] = response.status, response.result
                    goal["end"] = time.monotonic()
                handle.get_result_async().add_done_callback(on_result)
            client.send_goal_async(Ask.Goal(question=f"{args.question} ({i})"),
                                   feedback_callback=on_feedback).add_done_callback(on_response)
            goals.append(goal)
        spin_until(lambda: all(g["end"] for g in goals), args.timeout_s)
        flood_s = max(time.monotonic() - sent, 1e-9)
        during = sum(t >= sent for t in chunks) / flood_s
        spin_until(lambda: False, 2.0)          # the diagnostics of the flood's end
        ended = [g for g in goals if g["end"]]
        took = [g["end"] - sent for g in ended]
        reasons = Counter(g["result"].finish_reason if g["result"] else "rejected"
                          for g in ended)
        gaps = sum(g["seqs"] != list(range(len(g["seqs"]))) for g in ended)
        print(f"{len(goals)} goals: {dict(reasons)}; never ended: {len(goals) - len(ended)}")
        if took:
            print(f"time to result: median {statistics.median(took):.2f} s, "
                  f"max {max(took):.2f} s; goals whose feedback had gaps: {gaps}")
        print(f"fresh chunks: {before:.1f}/s before, {during:.1f}/s during the flood "
              f"({flood_s:.1f} s); deadline misses during it: "
              f"{sum(misses.values()) - misses_before}")
        return 0 if len(ended) == len(goals) else 1
    finally:
        client.destroy()
        node.destroy_node()
        rclpy.shutdown()


if __name__ == "__main__":
    sys.exit(main())
