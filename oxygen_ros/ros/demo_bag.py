"""The synthetic demo bag: a tabletop world's cameras, joint states, task instruction and
dialogue requests, written with `rosbags` (MCAP or sqlite3) as a robot would record them."""

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import cv2
import numpy as np
from rosbags.interfaces import (
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)
from rosbags.rosbag2 import StoragePlugin, Writer

from oxygen_ros.demo.questions import demo_dialogue
from oxygen_ros.demo.world import TabletopWorld
from oxygen_ros.ros.bag import NS, TYPESTORE

RAW_ENCODINGS = ("rgb8", "bgr8", "mono8")
COMPRESSED_ENCODINGS = ("jpeg", "png")
CAMERA_TOPICS = ("/cameras/base/image_raw", "/cameras/left_wrist/image_raw",
                 "/cameras/right_wrist/image_raw")


def _qos(reliable: bool, transient_local: bool = False, depth: int = 10) -> Qos:
    never = QosTime(0, 0)
    return Qos(QosHistory.KEEP_LAST, depth,
               QosReliability.RELIABLE if reliable else QosReliability.BEST_EFFORT,
               QosDurability.TRANSIENT_LOCAL if transient_local else QosDurability.VOLATILE,
               never, never, QosLiveliness.AUTOMATIC, never, False)


@dataclass
class DemoBagSpec:
    duration_s: float = 10.0
    camera_hz: float = 15.0
    joint_hz: float = 50.0
    encoding: str = "jpeg"               # rgb8, bgr8, mono8, jpeg or png
    width: int = 320
    height: int = 240
    grayscale: bool = False              # a gray scene: every encoding carries the same pixels
    cameras: int = 3
    instruction: Optional[str] = None    # default: the world's task
    dialogue: Optional[Sequence[tuple[float, str]]] = None   # default: demo_dialogue
    storage: str = "mcap"                # mcap or sqlite3
    start_time_s: float = 1_700_000_000.0
    seed: int = 0
    topics: Sequence[str] = field(default=CAMERA_TOPICS)

    def __post_init__(self) -> None:
        if int(self.duration_s * self.camera_hz) < 1:
            raise ValueError(f"a bag of {self.duration_s:g} s at {self.camera_hz:g} Hz holds no "
                             f"camera frame; it needs at least "
                             f"{math.ceil(1000 / self.camera_hz) / 1000:g} s")


def _image(pixels: np.ndarray, encoding: str, stamp_ns: int, frame_id: str):
    Header = TYPESTORE.types["std_msgs/msg/Header"]
    Time = TYPESTORE.types["builtin_interfaces/msg/Time"]
    header = Header(stamp=Time(sec=stamp_ns // NS, nanosec=stamp_ns % NS), frame_id=frame_id)
    if encoding in COMPRESSED_ENCODINGS:
        ok, data = cv2.imencode(".jpg" if encoding == "jpeg" else ".png",
                                cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR))
        assert ok
        return TYPESTORE.types["sensor_msgs/msg/CompressedImage"](
            header=header, format=encoding, data=data.ravel())
    if encoding == "bgr8":
        pixels = pixels[..., ::-1]
    elif encoding == "mono8":
        pixels = cv2.cvtColor(pixels, cv2.COLOR_RGB2GRAY)
    channels = 1 if pixels.ndim == 2 else 3
    return TYPESTORE.types["sensor_msgs/msg/Image"](
        header=header, height=pixels.shape[0], width=pixels.shape[1], encoding=encoding,
        is_bigendian=0, step=pixels.shape[1] * channels,
        data=np.ascontiguousarray(pixels).ravel())


def write_demo_bag(path: str | Path, spec: DemoBagSpec = DemoBagSpec()) -> Path:
    """A bag of the tabletop world of `spec.seed` (demo/world.py): its cameras at camera_hz,
    the expert's joint states at joint_hz, the task instruction (transient local) and a
    few questions (demo_dialogue)."""
    if spec.encoding not in RAW_ENCODINGS + COMPRESSED_ENCODINGS:
        raise ValueError(f"encoding must be one of {RAW_ENCODINGS + COMPRESSED_ENCODINGS}")
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; choose a new path")
    world = TabletopWorld(spec.seed)
    compressed = spec.encoding in COMPRESSED_ENCODINGS
    image_type = "sensor_msgs/msg/CompressedImage" if compressed else "sensor_msgs/msg/Image"
    String = TYPESTORE.types["std_msgs/msg/String"]
    JointState = TYPESTORE.types["sensor_msgs/msg/JointState"]
    start = int(spec.start_time_s * NS)
    storage = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}[spec.storage]
    records = []   # (time_ns, connection key, message, msgtype)
    for i in range(int(spec.duration_s * spec.camera_hz)):
        t = i / spec.camera_hz
        stamp = start + int(round(t * NS))
        for camera in range(spec.cameras):
            pixels = world.frame(camera, t, spec.height, spec.width)
            if spec.grayscale:
                pixels = np.repeat(cv2.cvtColor(pixels, cv2.COLOR_RGB2GRAY)[..., None], 3, axis=2)
            records.append((stamp, f"camera{camera}",
                            _image(pixels, spec.encoding, stamp, f"camera_{camera}"), image_type))
    Header = TYPESTORE.types["std_msgs/msg/Header"]
    Time = TYPESTORE.types["builtin_interfaces/msg/Time"]
    for i in range(int(spec.duration_s * spec.joint_hz)):
        t = i / spec.joint_hz
        stamp = start + int(round(t * NS))
        records.append((stamp, "joints", JointState(
            header=Header(stamp=Time(sec=stamp // NS, nanosec=stamp % NS), frame_id=""),
            name=world.joint_names, position=world.joint_positions(t),
            velocity=np.zeros(0), effort=np.zeros(0)), "sensor_msgs/msg/JointState"))
    records.append((start, "instruction", String(data=spec.instruction or world.instruction),
                    "std_msgs/msg/String"))
    dialogue = demo_dialogue(world) if spec.dialogue is None else spec.dialogue
    for t, text in (d for d in dialogue if d[0] < spec.duration_s):
        records.append((start + int(t * NS), "dialogue", String(data=text), "std_msgs/msg/String"))
    records.sort(key=lambda r: r[0])

    topics = {f"camera{c}": spec.topics[c] + ("/compressed" if compressed else "")
              for c in range(spec.cameras)}
    topics |= {"joints": "/joint_states", "instruction": "/oxygen/instruction",
               "dialogue": "/oxygen/dialogue/request"}
    offered = {"instruction": _qos(True, transient_local=True, depth=1),
               "dialogue": _qos(True, depth=100)}
    with Writer(path, version=9, storage_plugin=storage) as writer:
        connections = {}
        for time_ns, key, message, msgtype in records:
            if key not in connections:
                connections[key] = writer.add_connection(
                    topics[key], msgtype, typestore=TYPESTORE,
                    offered_qos_profiles=[offered.get(key, _qos(False, depth=5))])
            writer.write(connections[key], time_ns, TYPESTORE.serialize_cdr(message, msgtype))
    return path
