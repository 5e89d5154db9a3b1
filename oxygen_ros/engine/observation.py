"""Observation: one synchronized set of camera images, robot state and instruction."""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Observation:
    images: dict[str, np.ndarray]      # camera name -> uint8 [H, W, 3] RGB
    state: np.ndarray                  # robot state (normalized to [-1, 1] for the prompt)
    instruction: str
    stamp: float                       # seconds (sensor time)
    robot: str = ""                    # the robot it came from ("": the only one)
