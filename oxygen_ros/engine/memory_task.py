"""MemoryTask: every memory_period_s of sensor time, a summary of the frames since the last
one, decoded over the newest observation and a memory prompt holding the previous summary.
Frames are numbered per robot (in a fleet, a robot's memory counts its own frames only).
A window that elapsed while a summary was in flight opens at the next frame or, when no
observation follows (the stream ended), at the next idle step, over the newest prefix."""

import itertools
from typing import Optional

from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.observation import Observation
from oxygen_ros.engine.outputs import MemorySummary
from oxygen_ros.engine.request import LanguageRequest, sampling_generator

MEMORY_PRIORITY = 1
MAX_PREVIOUS_CHARS = 200


class MemoryTask:
    def __init__(self, tokenizer, config: EngineConfig, robot: str = ""):
        self.tokenizer = tokenizer
        self.config = config
        self.robot = robot
        self.previous = ""
        self.window_start: Optional[float] = None
        self.first_frame = 0
        self.frames = 0           # this robot's frames seen: the number of the next one
        self.in_flight: Optional[LanguageRequest] = None
        self._ids = itertools.count(1)
        self._window = (0.0, 0.0, 0)   # start, end, frames of the request in flight
        self.newest: Optional[tuple[float, int]] = None   # stamp, number of the newest frame

    def observe(self, observation: Observation, now: float) -> Optional[LanguageRequest]:
        """A summary request when the period has elapsed (and none is in flight)."""
        if self.config.memory_period_s <= 0:
            return None
        frame_id, self.frames = self.frames, self.frames + 1
        if self.window_start is None:
            self.window_start, self.first_frame = observation.stamp, frame_id
        self.newest = (observation.stamp, frame_id)
        return self.due(now)

    def is_due(self) -> bool:
        """No summary in flight and the newest frame is a period past the window's start."""
        return (self.in_flight is None and self.newest is not None
                and self.newest[0] - self.window_start >= self.config.memory_period_s)

    def due(self, now: float) -> Optional[LanguageRequest]:
        """The next summary request, up to the newest frame, when one is due."""
        if not self.is_due():
            return None
        stamp, frame_id = self.newest
        text = self.config.memory_template.format(previous=self.previous[-MAX_PREVIOUS_CHARS:],
                                                  first=self.first_frame, last=frame_id)
        request_id = next(self._ids)
        self.in_flight = LanguageRequest(
            id=request_id, kind="memory", priority=MEMORY_PRIORITY,
            prompt=self.tokenizer.encode(text, bos=False),
            max_tokens=self.config.memory_max_tokens, arrival=now,
            stream=self.tokenizer.stream(),
            generator=sampling_generator(self.config.seed, "memory", self.robot,
                                         request_id),
            robot=self.robot)
        self._window = (self.window_start, stamp, frame_id - self.first_frame + 1)
        self.window_start, self.first_frame = stamp, frame_id + 1
        return self.in_flight

    def restart(self) -> None:
        """A break in the robot's frames (shed): the next frame starts a new window."""
        self.window_start, self.newest = None, None

    def abandon(self) -> None:
        """The summary in flight ended without text (timeout): the next window starts one."""
        self.in_flight = None

    def finished(self, request: LanguageRequest) -> MemorySummary:
        text = self.tokenizer.decode(
            [t for t in request.generated if t != getattr(self.tokenizer, "eos_id", None)])
        self.previous = text
        self.in_flight = None
        start, end, frames = self._window
        return MemorySummary(start, end, text, frames, self.robot)
