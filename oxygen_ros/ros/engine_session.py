"""EngineSession: one configure's engine reaches the robot ports only while that configure
lasts (no ROS). A teardown waits 10 s for the engine thread's frame; a frame that outlives
it (a full-size model on a CPU takes longer) finishes unheard: its chunk must not reach the
next configure's ports, whose joints, limits and plans are not the ones it was computed
for."""

import threading
from typing import Callable


class EngineSession:
    def __init__(self):
        self._lock = threading.Lock()
        self._open = True

    def deliver(self, handler: Callable) -> Callable:
        """`handler`, called only while the session is open."""
        def call(item) -> None:
            with self._lock:
                if self._open:
                    handler(item)
        return call

    def end(self) -> None:
        """No more deliveries; returns once one in progress has finished."""
        with self._lock:
            self._open = False
