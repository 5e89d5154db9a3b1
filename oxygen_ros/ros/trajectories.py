"""Chunks as trajectory_msgs/JointTrajectory (joint_trajectory_controller's input)."""

import math
from typing import Sequence

import numpy as np
from builtin_interfaces.msg import Duration
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from oxygen_ros.ros.stamps import time_from_ns


def trajectory_msg(stamp_ns: int, actions: np.ndarray, dt: float, joint_names: Sequence[str],
                   first_step: int = 0) -> JointTrajectory:
    """The chunk's remaining steps as a joint trajectory starting at the observation time
    (joint_trajectory_controller drops points whose time has passed)."""
    msg = JointTrajectory(joint_names=list(joint_names))
    msg.header.stamp = time_from_ns(stamp_ns)
    for step in range(first_step, actions.shape[0]):
        seconds = step * dt
        whole = math.floor(seconds)
        msg.points.append(JointTrajectoryPoint(
            positions=actions[step].astype(float).tolist(),
            time_from_start=Duration(sec=int(whole), nanosec=int(round((seconds - whole) * 1e9)))))
    return msg
