"""Clocks: the engine measures step costs and deadlines through one of these."""

import time


class MonotonicClock:
    def now(self) -> float:
        return time.perf_counter()


class ManualClock:
    """A clock that moves only when told: deterministic deadline tests and cost models."""

    def __init__(self, start: float = 0.0):
        self.time = start

    def now(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds

    def set(self, time: float) -> None:
        self.time = max(self.time, time)
