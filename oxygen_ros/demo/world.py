"""TabletopWorld: a procedural pick-and-place scene, a pure function of a seed and time.

A table seen from above by a base camera and from the gripper by two wrist cameras, 2-4
objects (a colour and a shape each) and a bin. A scripted expert does the instruction
"pick up the <colour> <shape> and put it in the bin": reach, grasp, carry, release,
move back. The end effector (x, y, z, gripper) maps to 14 joint positions through a
fixed linear map, so states and actions are joint vectors as on a real robot. Everything
a camera, a bag or a trainer needs comes from (seed, t): frames, joint states, the
expert's next actions, and the ground truth the questions module answers from.
"""

import math
from dataclasses import dataclass
import cv2
import numpy as np

COLORS = {"red": (215, 40, 40), "blue": (40, 80, 225), "green": (35, 165, 60),
          "yellow": (235, 200, 35)}
SHAPES = ("cup", "block", "ball", "box")
TABLE, BIN, GRIPPER = (150, 118, 86), (60, 60, 60), (230, 230, 230)
NUM_JOINTS = 14
HOME = (0.0, -0.85, 0.6, 1.0)                 # x, y, z, gripper (1 open, 0 closed)
# phase boundaries in seconds: reach, grasp (close the gripper and lift), carry, release,
# return; then done
PHASES = (("reaching", 3.0), ("grasping", 4.3), ("carrying", 6.5), ("releasing", 7.1),
          ("returning", 8.6))
HELD_S = 3.6             # the gripper has closed: from here the target moves with it
CAMERAS = ("base", "left_wrist", "right_wrist")
BASE_VIEW = 2.2          # table units across the base camera's (square, uncropped) view
THING_RADIUS = 0.19      # a thing's drawn half-size in table units, on the table (z = 0)
_JOINT_MAP = np.random.default_rng(1234).uniform(-0.6, 0.6, (NUM_JOINTS, 4))


@dataclass(frozen=True)
class Thing:
    color: str
    shape: str
    x: float            # table coordinates: x left (-1) to right (+1)
    y: float            # y back (-1) to front (+1), as the base camera sees them

    @property
    def name(self) -> str:
        return f"{self.color} {self.shape}"


def _ease(a, b, u: float):
    """Cosine interpolation from a to b for u in [0, 1] (smooth start and stop)."""
    w = 0.5 - 0.5 * math.cos(math.pi * min(max(u, 0.0), 1.0))
    return tuple(x + (y - x) * w for x, y in zip(a, b))


class TabletopWorld:
    def __init__(self, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.seed = seed
        corner = rng.integers(4)
        self.bin = (0.72 if corner % 2 else -0.72, 0.72 if corner // 2 else -0.72)
        count = int(rng.integers(2, 5))
        colors = rng.permutation(list(COLORS))[:count]
        things, attempts = [], 0
        while len(things) < count:
            attempts += 1
            x, y = rng.uniform(-0.7, 0.7, 2)
            far = all(math.hypot(x - t.x, y - t.y) > 0.45 for t in things)
            if far and math.hypot(x - self.bin[0], y - self.bin[1]) > 0.55 or attempts > 500:
                things.append(Thing(str(colors[len(things)]), str(rng.choice(SHAPES)),
                                    float(x), float(y)))
        self.things = tuple(things)
        self.target = int(rng.integers(count))
        target = self.things[self.target]
        above_target, at_target = (target.x, target.y, 0.45, 1.0), (target.x, target.y, 0.08, 1.0)
        above_bin = (self.bin[0], self.bin[1], 0.45, 0.0)
        reached, lifted, carried, released, returned = (end for _, end in PHASES)
        self._keys = ((0.0, HOME), (2.2, above_target), (reached, at_target),
                      (HELD_S, (target.x, target.y, 0.08, 0.0)),
                      (lifted, (target.x, target.y, 0.45, 0.0)), (carried, above_bin),
                      (released, (self.bin[0], self.bin[1], 0.45, 1.0)), (returned, HOME))

    # -- the task -----------------------------------------------------------------------------
    @property
    def instruction(self) -> str:
        return f"pick up the {self.things[self.target].name} and put it in the bin"

    def phase(self, t: float) -> str:
        return next((name for name, end in PHASES if t < end), "done")

    def end_effector(self, t: float) -> tuple[float, float, float, float]:
        """(x, y, z, gripper) of the expert at time t."""
        keys = self._keys
        if t <= keys[0][0]:
            return keys[0][1]
        for (t0, a), (t1, b) in zip(keys, keys[1:]):
            if t < t1:
                return _ease(a, b, (t - t0) / (t1 - t0))
        return keys[-1][1]

    def joint_positions(self, t: float) -> np.ndarray:
        """The 14 joint positions the end effector maps to (fixed linear map, in [-1, 1])."""
        x, y, z, g = self.end_effector(t)
        return np.clip(_JOINT_MAP @ np.array([x, y, z * 2 - 1, g * 2 - 1]), -1.0, 1.0)

    def actions(self, t: float, horizon: int, dt: float) -> np.ndarray:
        """The expert's next `horizon` joint targets from t: [horizon, 14]."""
        return np.stack([self.joint_positions(t + i * dt) for i in range(horizon)])

    @property
    def joint_names(self) -> list[str]:
        return [f"joint_{i}" for i in range(NUM_JOINTS)]

    # -- where things are -------------------------------------------------------------------------
    def where(self, index: int, t: float) -> tuple[float, float, float, str]:
        """(x, y, z, place) of thing `index`: place is table, gripper or bin."""
        thing = self.things[index]
        if index != self.target or t < HELD_S:
            return thing.x, thing.y, 0.0, "table"
        if t < PHASES[3][1]:
            x, y, z, _ = self.end_effector(t)
            return x, y, max(0.0, z - 0.08), "gripper"
        return self.bin[0], self.bin[1], 0.0, "bin"

    def drawing_order(self, t: float) -> list[int]:
        """The things from the one drawn first to the one drawn last (on top): a thing in
        the gripper is above the table, so it hides what it passes over."""
        held = [i for i in range(len(self.things)) if self.where(i, t)[3] == "gripper"]
        return [i for i in range(len(self.things)) if i not in held] + held

    # -- cameras ----------------------------------------------------------------------------------
    def frame(self, camera: int, t: float, height: int = 112, width: int = 112) -> np.ndarray:
        """(H, W, 3) uint8 RGB: camera 0 looks down on the whole table, 1 and 2 are the
        gripper's wrist cameras (a zoomed view around it, left and right of the fingers)."""
        size = max(height, width)
        if camera == 0:
            center, scale = (0.0, 0.0), size / BASE_VIEW
        else:
            x, y, z, _ = self.end_effector(t)
            side = -0.18 if camera == 1 else 0.18
            center, scale = (x + side, y), size / (0.9 + 0.8 * z)
        image = np.empty((size, size, 3), np.uint8)
        image[:] = TABLE

        def px(x, y):
            return (int(round(size / 2 + (x - center[0]) * scale)),
                    int(round(size / 2 + (y - center[1]) * scale)))

        half = int(0.26 * scale)
        bx, by = px(*self.bin)
        cv2.rectangle(image, (bx - half, by - half), (bx + half, by + half), BIN, 2, cv2.LINE_AA)
        for index in self.drawing_order(t):
            x, y, z, place = self.where(index, t)
            _draw_thing(image, self.things[index], px(x, y),
                        int(THING_RADIUS * scale * (1 + z)), place == "bin")
        if camera == 0:
            x, y, z, g = self.end_effector(t)
            gx, gy = px(x, y)
            arm = int(0.1 * scale * (1 + z))
            spread = int(arm * (0.5 + 0.7 * g))
            cv2.line(image, (gx - spread, gy - arm), (gx - spread, gy + arm), GRIPPER, 2)
            cv2.line(image, (gx + spread, gy - arm), (gx + spread, gy + arm), GRIPPER, 2)
            cv2.line(image, (gx - spread, gy), (gx + spread, gy), GRIPPER, 1)
        if (height, width) != (size, size):
            top, left = (size - height) // 2, (size - width) // 2
            image = image[top:top + height, left:left + width]
        return np.ascontiguousarray(image)


def _draw_thing(image: np.ndarray, thing: Thing, center, radius: int, in_bin: bool) -> None:
    color = tuple(int(c * (0.6 if in_bin else 1.0)) for c in COLORS[thing.color])
    cx, cy = center
    radius = max(radius, 2)
    if thing.shape == "cup":
        cv2.circle(image, center, radius, color, max(2, radius // 3), cv2.LINE_AA)
    elif thing.shape == "ball":
        cv2.circle(image, center, radius, color, -1, cv2.LINE_AA)
    elif thing.shape == "block":
        cv2.rectangle(image, (cx - radius, cy - radius), (cx + radius, cy + radius), color, -1)
    else:   # box: a wide rectangle with a dark lid line across
        cv2.rectangle(image, (cx - radius * 3 // 2, cy - radius), (cx + radius * 3 // 2,
                                                                  cy + radius), color, -1)
        cv2.line(image, (cx - radius * 3 // 2, cy), (cx + radius * 3 // 2, cy), (40, 40, 40),
                 max(1, radius // 4))
