"""Inbox: new dialogue requests and cancellations from any thread (ROS callbacks, the Ask
server), taken in by the engine thread at its next step; and each robot's places for
dialogue requests (max_pending_requests), taken when a request is submitted or a place
held for it, given back when it ends, so that any thread sees the count at once."""

import queue
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Iterator, Optional, Union


@dataclass(frozen=True)
class NewDialogue:
    """A dialogue request as submitted (any thread); the engine takes it in at its next step."""
    request_id: int
    text: str
    max_tokens: Optional[int]
    arrival: float              # engine clock
    robot: str = ""
    full: bool = False          # no place was free: it ends queue_full when taken in


@dataclass(frozen=True)
class Cancel:
    """End dialogue request `request_id` at the engine's next step, if it has not ended."""
    request_id: int


class Inbox:
    def __init__(self, places: int):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._places = places                  # per robot
        self._taken: Counter = Counter()       # per robot: places taken

    def put(self, message: Union[NewDialogue, Cancel]) -> None:
        self._queue.put(message)

    def take(self) -> Iterator[Union[NewDialogue, Cancel]]:
        """Every message now in the inbox, oldest first (engine thread)."""
        while True:
            try:
                yield self._queue.get_nowait()
            except queue.Empty:
                return

    def take_place(self, robot: str) -> bool:
        """Take one of `robot`'s places if one is free."""
        with self._lock:
            if self._taken[robot] >= self._places:
                return False
            self._taken[robot] += 1
            return True

    def give_place(self, robot: str) -> None:
        with self._lock:
            self._taken[robot] -= 1

    def places_taken(self, robot: str) -> int:
        """`robot`'s dialogue requests not ended (waiting, running or not taken in yet) and
        places held for requests still to come."""
        with self._lock:
            return self._taken[robot]

    def __len__(self) -> int:
        return self._queue.qsize()
