"""Inbox: new dialogue requests and cancellations from any thread (ROS callbacks, the Ask
server), taken in by the engine thread at its next step; new requests counted per robot,
so a robot's queue limit also sees what has not been taken in yet."""

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


@dataclass(frozen=True)
class Cancel:
    """End dialogue request `request_id` at the engine's next step, if it has not ended."""
    request_id: int


class Inbox:
    def __init__(self):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._dialogue: Counter = Counter()    # per robot: new requests not taken yet

    def put(self, message: Union[NewDialogue, Cancel]) -> None:
        if isinstance(message, NewDialogue):
            with self._lock:
                self._dialogue[message.robot] += 1
        self._queue.put(message)

    def take(self) -> Iterator[Union[NewDialogue, Cancel]]:
        """Every message now in the inbox, oldest first (engine thread)."""
        while True:
            try:
                message = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(message, NewDialogue):
                with self._lock:
                    self._dialogue[message.robot] -= 1
            yield message

    def dialogue_of(self, robot: str) -> int:
        """`robot`'s new requests not taken in yet."""
        with self._lock:
            return self._dialogue[robot]

    def __len__(self) -> int:
        return self._queue.qsize()
