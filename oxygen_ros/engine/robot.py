"""Robot: what the engine keeps for each robot it serves — its plan in force (ActionTask,
which RTC continues), its FrameTiming, its memory windows, and the newest prefix its
language requests attach to. One engine serves one or several robots with one model and
one KV pool; a single robot is the fleet of one, named ""."""

from collections import Counter
from dataclasses import dataclass, field
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
    # its share of the engine's counters: requests, chunks (Engine.count)
    counters: Counter = field(default_factory=Counter)

    @property
    def observed(self) -> bool:
        """A frame has run on one of its observations: its requests have a prefix to attach
        to (newest is None only while a frame replaces it)."""
        return self.next_frame_at is not None

    def stop_actions(self) -> None:
        """No fresh observation: the robot's commands stopped, so its next chunk starts a
        new plan instead of continuing the abandoned one."""
        self.timing.reset()
        self.actions.plan = None
