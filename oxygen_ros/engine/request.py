"""Language requests: their state from arrival to last token."""

import enum
import zlib
from dataclasses import dataclass, field
from typing import Optional

import torch

from oxygen_ros.cache.page_table import PageTable
from oxygen_ros.model.prefix import Prefix


def sampling_generator(seed: int, kind: str, robot: str, request_id: int) -> torch.Generator:
    """A request's own random stream: the same for the same request each run, another for
    another robot's or kind's request of the same number (each counts from 1)."""
    stream = zlib.crc32(f"{kind}:{robot}".encode())
    return torch.Generator().manual_seed((seed * 7919 + request_id) ^ (stream << 24))


# the reasons a request ends with its text whole: the model ended it, or it reached max_tokens
COMPLETED = ("eos", "length")


class Status(enum.Enum):
    WAITING = "waiting"        # arrived, not attached to a frame's prefix yet
    RUNNING = "running"        # attached: has a page table (prompt fed, or being fed)
    PREEMPTED = "preempted"    # pages freed under pressure; resumes by recompute
    FINISHED = "finished"


@dataclass(eq=False)
class LanguageRequest:
    id: int
    kind: str                  # "dialogue" or "memory"
    priority: int              # larger wins pages; the lowest is preempted first
    prompt: list[int]          # tokens appended after the frame's observation prefix
    max_tokens: int
    arrival: float
    stream: object             # the tokenizer's stream(): push(id) -> text, flush()
    generator: torch.Generator
    status: Status = Status.WAITING
    frame_id: Optional[int] = None      # frame whose prefix this request reads
    prefix: Optional[Prefix] = None     # that prefix, kept to recompute after preemption
    table: Optional[PageTable] = None
    generated: list[int] = field(default_factory=list)
    seq: int = 0                        # text chunks emitted so far
    preemptions: int = 0
    truncated: bool = False             # the request text was cut to fit
    fed: int = 0                        # tokens of to_feed() already in the table
    finish_reason: str = ""             # why it ended (the reasons: docs/messages.md)
    robot: str = ""                     # whose observations it reads
    overtaken_by: int = 0               # the highest priority of a newer request that
                                        # attached while it waited: it attaches as that

    @property
    def next_token(self) -> int:
        """The last sampled token: its K/V are written by the next decode step."""
        return self.generated[-1]

    def to_feed(self) -> list[int]:
        """What follows the prefix in the table before decoding: the prompt and every
        generated token except the last (whose K/V the next decode step writes). A new
        request feeds its prompt; a preempted one recomputes this after resuming."""
        return self.prompt + self.generated[:-1]

    @property
    def unfed(self) -> int:
        return len(self.prompt) + max(0, len(self.generated) - 1) - self.fed

    @property
    def decodable(self) -> bool:
        return self.status is Status.RUNNING and self.unfed == 0 and bool(self.generated)

