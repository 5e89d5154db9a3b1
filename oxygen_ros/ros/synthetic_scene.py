"""A deterministic moving multi-camera scene with joint states, for demos, bags and tests."""

import math
from typing import List

import numpy as np


class SyntheticScene:
    """Each camera sees a coloured square orbiting over a gradient; joints follow sines.

    frame(t) and joint_positions(t) are pure functions of t, so a recorded bag and a live
    stream of the same scene carry identical pixels.
    """

    def __init__(self, num_cameras: int = 3, height: int = 240, width: int = 320,
                 num_joints: int = 14, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.num_cameras, self.height, self.width, self.num_joints = (
            num_cameras, height, width, num_joints)
        self._colors = rng.integers(64, 256, size=(num_cameras, 3), dtype=np.uint8)
        self._phase = rng.uniform(0, 2 * math.pi, size=num_cameras)
        self._joint_freq = rng.uniform(0.1, 0.5, size=num_joints)
        self._joint_phase = rng.uniform(0, 2 * math.pi, size=num_joints)
        yy, xx = np.mgrid[0:height, 0:width]
        self._background = np.stack(
            [xx * 255 // max(width - 1, 1), yy * 255 // max(height - 1, 1),
             np.full_like(xx, 96)], axis=-1).astype(np.uint8)

    @property
    def joint_names(self) -> List[str]:
        return [f"joint_{i}" for i in range(self.num_joints)]

    def frame(self, camera: int, t: float) -> np.ndarray:
        """(H, W, 3) uint8 RGB image of camera `camera` at time t seconds."""
        image = self._background.copy()
        side = max(4, min(self.height, self.width) // 5)
        angle = 2 * math.pi * 0.25 * t + self._phase[camera]
        cy = int((self.height - side) * (0.5 + 0.4 * math.sin(angle)))
        cx = int((self.width - side) * (0.5 + 0.4 * math.cos(angle)))
        image[cy:cy + side, cx:cx + side] = self._colors[camera]
        return image

    def joint_positions(self, t: float) -> np.ndarray:
        return np.sin(2 * math.pi * self._joint_freq * t + self._joint_phase)
