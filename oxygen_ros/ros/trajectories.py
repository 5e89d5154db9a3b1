"""Chunks as trajectory_msgs/JointTrajectory (joint_trajectory_controller's input)."""

from typing import Sequence

import numpy as np
from builtin_interfaces.msg import Duration
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from oxygen_ros.ros.stamps import NS, time_from_ns


def trajectory_msg(stamp_ns: int, actions: np.ndarray, dt: float, joint_names: Sequence[str],
                   first_step: int = 0) -> JointTrajectory:
    """The chunk's remaining steps as a joint trajectory starting at the observation time
    (joint_trajectory_controller drops points whose time has passed)."""
    msg = JointTrajectory(joint_names=list(joint_names))
    msg.header.stamp = time_from_ns(stamp_ns)
    for step in range(first_step, actions.shape[0]):
        msg.points.append(JointTrajectoryPoint(positions=actions[step].astype(float).tolist(),
                                               time_from_start=duration(step * dt)))
    return msg


def hold_trajectory_msg(command: np.ndarray, joint_names: Sequence[str],
                        seconds: float) -> JointTrajectory:
    """One point at `command`, reached `seconds` after receipt: it replaces the trajectory in
    force. Stamp zero: it starts on receipt (a stamped one that ends by the time it arrives
    is refused as in the past; an empty one is refused outright)."""
    msg = JointTrajectory(joint_names=list(joint_names))
    msg.points.append(JointTrajectoryPoint(positions=command.astype(float).tolist(),
                                           time_from_start=duration(seconds)))
    return msg


def duration(seconds: float) -> Duration:
    sec, nanosec = divmod(round(seconds * NS), NS)
    return Duration(sec=sec, nanosec=nanosec)
