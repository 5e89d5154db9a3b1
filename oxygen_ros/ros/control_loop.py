"""ControlLoop: the per-step command tick on a thread of its own, on the monotonic clock,
real-time scheduled where the OS allows (no ROS).

Not an executor timer: the executor's one waiting thread also serves every service,
subscription and graph event. Not the normal scheduler when it can be helped: a process
starting beside the node (a `ros2` command joining the graph) took the CPU from the tick
for 60-300 ms. With SCHED_FIFO a tick waits only for its time and the interpreter lock,
as ros2_control's controller manager runs its loop."""

import math
import os
import threading
import time
from typing import Callable


class ControlLoop:
    """Calls tick() every period_s, phase kept: a late tick does not bring a burst of the
    ones it missed, the next comes at the next multiple of the period."""

    def __init__(self, period_s: float, tick: Callable[[], None], priority: int = 0,
                 name: str = "oxygen-control", clock: Callable[[], float] = time.monotonic):
        self.period_s, self.tick, self.clock, self.priority = period_s, tick, clock, priority
        self._stop, self._scheduled = threading.Event(), threading.Event()
        self.scheduling, self.refused = "", False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start ticking, once the thread is scheduled: `scheduling` says how, in words, and
        `refused` whether the OS refused the real-time priority (the words say why)."""
        self._thread.start()
        self._scheduled.wait()

    def stop(self, timeout_s: float = 2.0) -> None:
        """No tick starts after this returns (one in progress finishes first)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        self.refused, self.scheduling = real_time_scheduling(self.priority)
        self._scheduled.set()
        due = self.clock() + self.period_s
        while not self._stop.wait(max(0.0, due - self.clock())):
            self.tick()
            due = next_due(due, self.clock(), self.period_s)


def next_due(due: float, now: float, period_s: float) -> float:
    """The tick after the one due at `due`, skipping whole periods that `now` has passed."""
    missed = math.floor((now - due) / period_s) if now > due else 0
    return due + (missed + 1) * period_s


def real_time_scheduling(priority: int) -> tuple[bool, str]:
    """Put the calling thread under SCHED_FIFO at priority (1-99; 0 leaves it alone);
    (refused, how it is scheduled)."""
    if priority == 0:
        return False, "normal scheduler (control_priority 0)"
    try:
        os.sched_setscheduler(threading.get_native_id(), os.SCHED_FIFO,
                              os.sched_param(priority))
    except (OSError, AttributeError) as error:   # no CAP_SYS_NICE or rtprio limit; not Linux
        return True, (f"normal scheduler: SCHED_FIFO {priority} refused ({error}); allow it "
                      "with an rtprio limit (limits.conf) or CAP_SYS_NICE")
    return False, f"SCHED_FIFO priority {priority}"
