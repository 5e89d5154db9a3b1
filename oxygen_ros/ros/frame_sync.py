"""Pairs camera frames and joint states by timestamp into synchronized sets (no ROS imports)."""

import bisect
from collections import deque
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Dict, List, Optional


@dataclass
class SyncStats:
    published: int = 0
    dropped: int = 0     # evicted from a full buffer before they could be paired
    unpaired: int = 0    # primary frames given up: no joint state within slop
    missing: int = 0     # secondary cameras left out of a published set
    late: int = 0        # arrived with a stamp at or before the last published set


@dataclass
class SyncedSet:
    stamp_ns: int                       # the primary camera's stamp
    frames: Dict[str, Any]              # camera name -> frame, cameras that paired
    state: Any
    state_stamp_ns: int


_stamp = itemgetter(0)


class FrameSynchronizer:
    """Approximate-time pairing driven by the first (primary) camera.

    A primary frame is published with, for every other camera, the frame closest in time
    within `slop_ns`, and the closest joint state within `slop_ns`. While a partner may
    still arrive (its newest item is older than the window) the set waits, at most
    `max_delay_ns` behind the newest primary frame; then a camera is left out (the model
    masks it) and a frame without a joint state is given up.

    Joint states are kept for `state_horizon_ns` behind the newest one, whatever their rate,
    so a frame that took long to arrive and decode still finds the states of its instant,
    also from a 1 kHz arm; `state_buffer_size` only bounds memory.
    """

    def __init__(self, camera_names: List[str], slop_ns: int, max_delay_ns: int,
                 buffer_size: int = 8, state_horizon_ns: int = 1_000_000_000,
                 state_buffer_size: int = 10_000):
        if not camera_names:
            raise ValueError("at least one camera is required")
        self.camera_names = list(camera_names)
        self.slop_ns = slop_ns
        self.max_delay_ns = max_delay_ns
        self._frames = {name: deque() for name in camera_names}
        self._states: List[tuple] = []          # (stamp, state), in stamp order
        self._buffer_size = buffer_size
        self._last_state_ns: Optional[int] = None    # the stamp of the last state to arrive
        self._state_horizon_ns = state_horizon_ns
        self._state_buffer_size = state_buffer_size
        self._last_published_ns = float("-inf")
        self.stats = SyncStats()

    def add_frame(self, camera: str, stamp_ns: int, frame: Any) -> None:
        if stamp_ns <= self._last_published_ns:
            self.stats.late += 1
            return
        buffer = self._frames[camera]
        if len(buffer) == self._buffer_size:
            buffer.popleft()
            self.stats.dropped += 1
        buffer.append((stamp_ns, frame))

    def add_state(self, stamp_ns: int, state: Any) -> None:
        states = self._states
        bisect.insort(states, (stamp_ns, state), key=_stamp)
        self._last_state_ns = stamp_ns
        horizon = bisect.bisect_left(states, stamp_ns - self._state_horizon_ns, key=_stamp)
        del states[:max(horizon, len(states) - self._state_buffer_size)]

    def pop(self) -> Optional[SyncedSet]:
        """The oldest complete set, or None while partners may still arrive."""
        primary = self._frames[self.camera_names[0]]
        while primary:
            stamp, frame = primary[0]
            timed_out = primary[-1][0] - stamp > self.max_delay_ns
            state = self._match_state(stamp)
            if state == "wait" and not timed_out:
                return None
            if not isinstance(state, tuple):
                primary.popleft()
                self.stats.unpaired += 1
                continue
            frames = {self.camera_names[0]: frame}
            for name in self.camera_names[1:]:
                match = self._match_frame(name, stamp)
                if match == "wait" and not timed_out:
                    return None
                if isinstance(match, tuple):
                    frames[name] = match[1]
            primary.popleft()
            self.stats.missing += len(self.camera_names) - len(frames)
            self._consume(stamp)
            self.stats.published += 1
            return SyncedSet(stamp, frames, state[1], state[0])
        return None

    def _match(self, candidates, stamp: int, newest_ns: Optional[int]):
        """(stamp, item) among `candidates` closest to `stamp` within slop; "wait" while a
        partner may still come (the newest to arrive, stamped `newest_ns`, is older than the
        window); else "miss"."""
        best = min(candidates, key=lambda item: abs(item[0] - stamp), default=None)
        if best is not None and abs(best[0] - stamp) <= self.slop_ns:
            return best
        if newest_ns is None or newest_ns < stamp - self.slop_ns:
            return "wait"
        return "miss"

    def _match_frame(self, camera: str, stamp: int):
        buffer = self._frames[camera]
        return self._match(buffer, stamp, buffer[-1][0] if buffer else None)

    def _match_state(self, stamp: int):
        """The stamp-ordered joint states (thousands at 1 kHz) are bisected for the two
        around `stamp`; one stamped ahead of its time does not make later frames miss."""
        at = bisect.bisect_left(self._states, stamp, key=_stamp)
        return self._match(self._states[max(at - 1, 0):at + 1], stamp, self._last_state_ns)

    def _consume(self, stamp: int) -> None:
        """Forget every frame at or before a published set: sets never go back in time."""
        self._last_published_ns = stamp
        for name in self.camera_names[1:]:
            buffer = self._frames[name]
            while buffer and buffer[0][0] <= stamp - self.slop_ns:
                buffer.popleft()
