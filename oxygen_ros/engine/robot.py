"""Robot: what the engine keeps for each robot it serves — its plan in force (ActionTask,
which RTC continues), its FrameTiming, its memory windows, and the newest prefix its
language requests attach to. One engine serves one or several robots with one model and
one KV pool; a single robot is the fleet of one, named ""."""

from dataclasses import dataclass
from typing import Optional

from oxygen_ros.cache.page_table import PageTable
from oxygen_ros.engine.action_task import ActionTask
from oxygen_ros.engine.frame_timing import FrameTiming
from oxygen_ros.engine.memory_task import MemoryTask
from oxygen_ros.model.prefix import Prefix


@dataclass(eq=False)
class Robot:
    name: str
    actions: ActionTask
    timing: FrameTiming
    memory: MemoryTask
    newest: Optional[tuple[PageTable, Prefix, int]] = None   # table, prefix, frame id
    next_frame_at: Optional[float] = None      # engine clock; None before its first frame
    refused: str = ""                          # why admission refused it ("": served)
    times_shed: int = 0                        # by admission at run time


def robot_names(robots) -> list[str]:
    """The robot list, checked: names unique, each empty (the only robot) or a ROS name
    segment (letters, digits, underscores; not starting with a digit)."""
    names = list(robots)
    if not names:
        raise ValueError("an engine serves at least one robot")
    if len(set(names)) != len(names):
        twice = sorted({name for name in names if names.count(name) > 1})
        raise ValueError(f"robots named twice: {twice}")
    for name in names:
        if name == "" and len(names) == 1:
            continue
        if not (name and (name[0].isalpha() or name[0] == "_")
                and all(c.isalnum() or c == "_" for c in name) and name.isascii()):
            raise ValueError(f"robot name {name!r}: use letters, digits and underscores, "
                             "not starting with a digit")
    return names
