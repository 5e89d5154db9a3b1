"""The control process's handling of the node's messages, in-process on a real rclpy node
and a socketpair, its monotonic clock driven by the test: a chunk that a frame finishes
after the watchdog stopped the actions is not played when observations come back. And
the node's link to a real control process that stops reading: messages lost, counted. The
trajectories, received by a real subscriber."""

import os
import signal
import socket
import time

import numpy as np
import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectory

from oxygen_ros.ros import control_link, qos
from oxygen_ros.ros.control_process import ControlProcess, parse

WATCHDOG_S = 0.5
TRAJECTORIES = "/test_trajectory"


def start(rclpy_context, hold=False, trajectories=False):
    node = Node("control_under_test", context=rclpy_context)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    clock = [100.0]
    args = parse(["--fd", str(theirs.fileno()), "--topic", "/test_commands", "--rate", "50",
                  "--watchdog", str(WATCHDOG_S), "--lower", "-9", "-9", "--upper", "9", "9"]
                 + (["--trajectory-topic", TRAJECTORIES, "--joints", "a", "b"] if trajectories
                    else ["--dry-run"]) + (["--hold"] if hold else []))
    control = ControlProcess(node, theirs, args, monotonic=lambda: clock[0])
    control.take(control_link.state_message(True))
    return node, control, clock, (ours, theirs)


def plan(node, value, observed, age_s=0.0):
    now = node.get_clock().now().nanoseconds
    return control_link.plan_message(np.full((50, 2), value), now - round(age_s * 1e9), 0.02,
                                     now * 1e-9, observed)


def commanded(control):
    """One tick: the first joint's command it sent (None: none)."""
    before = control.counters["commands"]
    control._command()
    if control.counters["commands"] == before:
        return None
    return control.gate.last_command[0]


def test_a_chunk_finished_after_the_stop_is_not_played_when_observations_return(
        rclpy_context):
    node, control, clock, sockets = start(rclpy_context)
    try:
        control.take(control_link.observed_message(100.0))
        control.take(plan(node, 1.0, observed=100.0))
        assert commanded(control) == 1.0
        clock[0] = 100.0 + WATCHDOG_S + 0.02            # the camera went quiet: a stop
        assert commanded(control) is None and control.counters["watchdog_trips"] == 1
        control.take(plan(node, 2.0, observed=100.0))   # the frame that ran on 100.0 ends
        assert control.counters["chunk_after_stop"] == 1
        control.take(control_link.observed_message(101.0))
        clock[0] = 101.0
        assert commanded(control) is None            # back, but no plan from before the stop
        assert control.stream.plan is None
        control.take(plan(node, 3.0, observed=101.0))   # the first chunk of a fresh one
        assert commanded(control) == 3.0
        assert control.counters["chunk_after_stop"] == 1
    finally:
        node.destroy_node()
        for end in sockets:
            end.close()


def test_the_log_tells_the_first_fresh_observation_from_observations_back(rclpy_context,
                                                                           capfd):
    node, control, clock, sockets = start(rclpy_context)
    try:
        control.take(control_link.observed_message(100.0))
        control._command()
        clock[0] = 100.0 + WATCHDOG_S + 0.02
        control._command()
        control.take(control_link.observed_message(101.0))
        clock[0] = 101.0
        control._command()
        control.take(control_link.state_message(True))      # activated again
        control.take(control_link.observed_message(101.1))
        control._command()
        lines = [line for line in capfd.readouterr().err.splitlines()
                 if "actions" in line and "observation" in line]
        assert [line.split("]: ")[-1] for line in lines] == [
            "fresh observations: actions start",
            "no fresh observation for 0.520 s: watchdog stops new actions",
            "observations are back: actions resume",
            "fresh observations: actions start"], lines
    finally:
        node.destroy_node()
        for end in sockets:
            end.close()


def test_with_hold_the_last_command_is_held_until_a_fresh_chunk_comes(rclpy_context):
    node, control, clock, sockets = start(rclpy_context, hold=True)
    try:
        control.take(control_link.observed_message(100.0))
        control.take(plan(node, 1.0, observed=100.0))
        assert commanded(control) == 1.0
        clock[0] = 100.0 + WATCHDOG_S + 0.02
        control._command()
        control.take(plan(node, 2.0, observed=100.0))
        control.take(control_link.observed_message(101.0))
        clock[0] = 101.0
        held = control.counters["held_commands"]
        control._command()
        assert control.gate.last_command.tolist() == [1.0, 1.0]    # not the late chunk's 2.0
        assert control.counters["held_commands"] == held + 1
    finally:
        node.destroy_node()
        for end in sockets:
            end.close()


@pytest.mark.parametrize("hold", [False, True])
def test_trajectories_follow_the_plans_played_and_a_stop_or_deactivate_holds_the_last_command(
        rclpy_context, hold):
    """One publisher, in order: each plan taken while active as its trajectory; at the
    watchdog's stop and at a deactivate one point at the last command (a
    joint_trajectory_controller plays a trajectory to its end unless one replaces it); no
    trajectory of a plan the stop outdated or that came while inactive, none at a
    deactivate with nothing commanded."""
    node, control, clock, sockets = start(rclpy_context, hold=hold, trajectories=True)
    listener = Node("trajectory_listener", context=rclpy_context)
    received = []
    listener.create_subscription(JointTrajectory, TRAJECTORIES, received.append, qos.RELIABLE)
    executor = SingleThreadedExecutor(context=rclpy_context)
    executor.add_node(listener)

    def spin_until(done, seconds=30.0):
        deadline = time.monotonic() + seconds
        while not done() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        return done()

    try:
        assert spin_until(lambda: control.trajectories.get_subscription_count() > 0)
        control.take(control_link.state_message(False))       # nothing commanded yet
        control.take(control_link.state_message(True))
        control.take(control_link.observed_message(100.0))
        control.take(plan(node, 1.0, observed=100.0))         # trajectory 1.0
        assert commanded(control) == 1.0
        clock[0] = 100.0 + WATCHDOG_S + 0.02                  # the camera went quiet: hold 1.0
        control._command()
        assert control.counters["watchdog_trips"] == 1
        control.take(plan(node, 2.0, observed=100.0))         # outdated: none
        control.take(control_link.observed_message(101.0))   # back, and a fresh chunk
        clock[0] = 101.0
        control.take(plan(node, 3.0, observed=101.0))         # trajectory 3.0
        assert commanded(control) == 3.0
        control.take(control_link.state_message(False))      # deactivated: hold 3.0
        control.take(plan(node, 4.0, observed=101.0))         # inactive: none
        control.take(control_link.state_message(True))
        control.take(plan(node, 5.0, observed=101.0))         # trajectory 5.0
        # a plan whose every step is past when it comes (a loaded machine's): the commands
        # hold its last step, and so does its trajectory (an empty one would be refused)
        control.take(plan(node, 6.0, observed=101.0, age_s=1.5))
        assert spin_until(lambda: len(received) >= 6)
        spin_until(lambda: len(received) > 6, seconds=0.5)    # nothing else comes
        holds = [len(m.points) == 1 for m in received]
        assert holds == [False, True, False, True, False, True], holds
        assert [m.points[0].positions[0] for m in received] == [1.0, 1.0, 3.0, 3.0, 5.0, 6.0]
        for msg in received:
            assert msg.joint_names == ["a", "b"]
        for msg in received[0:5:2]:         # a chunk's trajectory: from its observation's stamp
            assert msg.header.stamp.sec > 0 and 45 <= len(msg.points) <= 50
            assert (msg.points[1].time_from_start.nanosec
                    - msg.points[0].time_from_start.nanosec) == 20_000_000
        for msg in received[1::2]:          # a hold: on receipt, one tick at 50 Hz
            assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (0, 0)
            assert list(msg.points[0].positions) == [msg.points[0].positions[0]] * 2
            assert (msg.points[0].time_from_start.sec,
                    msg.points[0].time_from_start.nanosec) == (0, 20_000_000)
        assert control.counters["hold_trajectories"] == 2
        assert control.counters["chunk_after_stop"] == 1
    finally:
        executor.shutdown()
        listener.destroy_node()
        node.destroy_node()
        for end in sockets:
            end.close()


def test_a_control_process_that_stops_reading_loses_messages_counted_without_stalling():
    link = control_link.ControlLink(control_link.ControlSettings(
        node_name="lossy", namespace="/", topic="/lossy_commands", rate_hz=50.0, priority=0,
        lower=(-9.0, -9.0), upper=(9.0, 9.0), watchdog_s=0.5, hold=False, blend_s=0.0,
        publish=False, use_sim_time=False))
    os.kill(link.process.pid, signal.SIGSTOP)          # alive, reading nothing
    try:
        message = control_link.plan_message(np.zeros((50, 2)), 1_000_000_000, 0.02, 1.0, 1.0)
        sends = 0
        while link.lost_messages == 0 and sends < 100_000:   # each send returns at once
            link.send(message)
            sends += 1
        assert link.lost_messages == 1 and 0 < sends < 100_000
        link.send(message)
        assert link.lost_messages == 2
    finally:
        os.kill(link.process.pid, signal.SIGCONT)
        assert link.close() is not None
