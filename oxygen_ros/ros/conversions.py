"""Messages <-> engine objects: Observation in; chunks, text, summaries out."""

import math
import unicodedata
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from oxygen_ros.engine.observation import Observation
from oxygen_ros.msg import ActionChunk as ActionChunkMsg
from oxygen_ros.msg import DialogueChunk, MemorySummary
from oxygen_ros.ros.image_conversion import ImageConversionError, image_to_rgb
from oxygen_ros.ros.stamps import time_from_ns, to_seconds

RECORDED_AGE_S = 60.0   # a stamp this old is more likely a bag's than a late message's
_UNITS = ((365.25 * 86400, "years"), (86400, "days"), (3600, "h"), (60, "min"))


def stale_stamp_text(age_s: float, stamp: int, sim_time: bool) -> str:
    """How old a dropped message's stamp is, and what most likely made it so, for its log
    line: `stamp` in nanoseconds, `sim_time` whether the node runs on /clock."""
    if stamp == 0:
        return ("stamp zero: its publisher left header.stamp unset (stamp each message "
                "with its capture time)")
    text = f"stamp {age_s:.3f} s old"
    if age_s < RECORDED_AGE_S:
        return text
    size, unit = next((size, unit) for size, unit in _UNITS if age_s >= size)
    text = f"stamp {age_s:.0f} s ({age_s / size:.1f} {unit}) old"
    if sim_time:
        return (text + "; this node's /clock runs ahead of these stamps: replay the bag with "
                "--clock, and let nothing else publish /clock")
    return (text + "; a bag's recorded stamps? replay it with --clock and use_sim_time:=true, "
            "or with oxygen-ros replay --restamp")


def future_stamp_text(ahead_s: float, now: int, sim_time: bool) -> str:
    """How far ahead of the node's clock (`now`, nanoseconds) a dropped message's stamp is,
    for its log line; on /clock before it ticked, that there is no time yet."""
    if sim_time and now == 0:
        return ("stamped before this node heard /clock (use_sim_time: the clock is zero until "
                "it ticks; messages are taken once it does)")
    return f"stamp {ahead_s:.3f} s ahead of this node's clock"


@dataclass
class Decoded:
    observation: Observation | None
    problems: list[str] = field(default_factory=list)   # each kind of bad input, once
    details: dict[str, str] = field(default_factory=dict)   # kind -> what, for the log


MAX_INSTRUCTION_CHARS = 1000   # a longer instruction is cut (and counted)


FILLERS = frozenset("\u115f\u1160\u2800\u3164\uffa0")   # Hangul fillers, Braille blank


def is_blank(text: str) -> bool:
    """Nothing a model could read: white space, invisible format characters (zero-width
    space, joiners, BOM), control characters and blank fillers only."""
    return all(c.isspace() or c in FILLERS or unicodedata.category(c) in ("Cf", "Cc")
               for c in text)


def clean_instruction(text: str) -> tuple[Optional[str], str]:
    """(the instruction to use or None to keep the current one, the problem or '')."""
    if is_blank(text):
        return None, "empty_instruction"
    if len(text) > MAX_INSTRUCTION_CHARS:
        return text[:MAX_INSTRUCTION_CHARS], "long_instruction"
    return text, ""


def take_instruction(text: str, current: str, report, logger) -> str:
    """The task after an instruction message: `text` cleaned, or `current` if it is empty.
    report(kind, detail) counts a problem; a change of task is logged (throttled)."""
    cleaned, problem = clean_instruction(text)
    if problem:
        report(problem, f"instruction of {len(text)} characters "
                        f"({'ignored' if cleaned is None else 'cut'})")
    if cleaned is None:
        return current
    if cleaned != current:
        logger.info(f"instruction: {cleaned[:120]!r}", throttle_duration_sec=1.0)
    return cleaned


def joint_state_problem(msg) -> str:
    """'' for a usable sensor_msgs/JointState, else the kind of problem."""
    names, positions = list(msg.name), list(msg.position)
    if not names or len(positions) != len(names) or len(set(names)) != len(names):
        return "joint_state_mismatch"
    if not all(math.isfinite(p) for p in positions):
        return "non_finite_joint_state"
    return ""


def observation_from_msg(msg, camera_names: Sequence[str], joint_names: Sequence[str],
                         fallback_instruction: str, image_size: int = 0) -> Decoded:
    """Decode an Observation message. Unusable cameras are dropped (the model masks them);
    the state follows `joint_names`: a state without one of them, or not finite, drops the
    message (no policy is fed a made-up position; the watchdog stops the robot).
    Images not at `image_size` are used (resized by the model) and counted."""
    problems, details = [], {}

    def found(kind: str, detail: str) -> None:
        problems.append(kind)
        details.setdefault(kind, detail)

    def decoded(observation: Optional[Observation]) -> Decoded:
        return Decoded(observation, list(dict.fromkeys(problems)), details)   # each kind once

    if len(msg.images) != len(msg.camera_names):
        return Decoded(None, ["malformed_observation"], {"malformed_observation": (
            f"{len(msg.images)} images for {len(msg.camera_names)} camera names")})
    images = {}
    for name, image in zip(msg.camera_names, msg.images):
        if name not in camera_names:
            found("unknown_camera", f"camera {name!r} is not one of {list(camera_names)}")
            continue
        if name in images:
            found("duplicate_camera", f"camera {name!r} twice")
            continue
        try:
            images[name] = image_to_rgb(image)
        except ImageConversionError as error:
            found("bad_image", f"camera {name!r}: {error}")
            continue
        if image_size and images[name].shape[:2] != (image_size, image_size):
            height, width = images[name].shape[:2]
            found("wrong_image_size", f"camera {name!r}: {width}x{height}, not "
                                      f"{image_size}x{image_size}")
    if not images:
        found("no_usable_camera", "no image usable")
        return decoded(None)
    if len(images) < len(camera_names):
        found("missing_camera", "no image from "
              + ", ".join(repr(n) for n in camera_names if n not in images)
              + " (camera_ingest had none within sync_slop_s of the first camera's, or the "
              "camera is silent)")

    names = list(msg.state.name)
    if len(msg.state.position) != len(names) or len(set(names)) != len(names):
        # a name twice: its last value is used
        found("joint_state_mismatch", f"{len(names)} joint names ({len(set(names))} "
                                      f"different), {len(msg.state.position)} positions")
    positions = dict(zip(names, msg.state.position))
    if joint_names:
        if set(joint_names) - set(positions):
            found("joint_names_mismatch", "no position for " + ", ".join(
                repr(n) for n in joint_names if n not in positions) + " (dropped)")
            return decoded(None)
        state = np.array([positions[name] for name in joint_names], dtype=np.float64)
    else:
        state = np.array(msg.state.position, dtype=np.float64)
    if not np.isfinite(state).all():
        found("non_finite_state", "joint positions not finite: " + ", ".join(
            repr(name) for name, value in zip(joint_names or names, state)
            if not np.isfinite(value)) + " (dropped)")
        return decoded(None)
    instruction, problem = clean_instruction(msg.instruction) if msg.instruction else (None, "")
    if problem:
        problems.append(problem)
    instruction = instruction or fallback_instruction
    return decoded(Observation(images, state, instruction, to_seconds(msg.header.stamp)))


def action_chunk_msg(frame_id: int, stamp_ns: int, actions: np.ndarray, dt: float,
                     joint_names: Sequence[str]) -> ActionChunkMsg:
    """The chunk as ActionChunk, stamped (in nanoseconds, exactly) with its observation's
    stamp."""
    msg = ActionChunkMsg(frame_id=frame_id, horizon=actions.shape[0],
                         action_dim=actions.shape[1], dt=float(dt),
                         joint_names=list(joint_names),
                         actions=np.ascontiguousarray(actions, dtype=np.float32).ravel().tolist())
    msg.header.stamp = time_from_ns(stamp_ns)
    return msg


def ros_text(text: str) -> str:
    """Text as a ROS string carries it whole: a string ends at its first NUL on the wire, so a
    U+0000 the model wrote becomes U+FFFD (what a byte the text cannot hold becomes)."""
    return text.replace("\x00", "\ufffd")


def dialogue_msg(chunk, stamp_ns: int, missing_cameras: Sequence[str] = (),
                 request_id: Optional[int] = None) -> DialogueChunk:
    """A text chunk as DialogueChunk, about the observation stamped `stamp_ns` that lacked
    `missing_cameras`; request_id: the id its client knows (default the engine's)."""
    msg = DialogueChunk(request_id=chunk.request_id if request_id is None else request_id,
                        seq=chunk.seq, text=ros_text(chunk.text), final=chunk.final,
                        finish_reason=chunk.finish_reason, missing_cameras=list(missing_cameras))
    msg.header.stamp = time_from_ns(stamp_ns)
    return msg


def memory_msg(text: str, stamp_ns: int, start_ns: int, end_ns: int) -> MemorySummary:
    """A summary published at `stamp_ns` of the frames stamped after `start_ns` (the first
    window: from it) up to `end_ns`."""
    msg = MemorySummary(text=ros_text(text))
    msg.header.stamp = time_from_ns(stamp_ns)
    msg.window_start = time_from_ns(start_ns)
    msg.window_end = time_from_ns(end_ns)
    return msg
