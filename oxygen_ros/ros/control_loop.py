"""ControlLoop: the per-step command tick on a thread of its own, on the monotonic clock,
real-time scheduled where the OS allows (no ROS).

Not an executor timer: the executor's one waiting thread also serves every service,
subscription and graph event. Not the normal scheduler when it can be helped (as
ros2_control's controller manager runs its loop): on a busy core a tick waited a time
slice (40-52 ms intervals at 50 Hz in the participants test)."""

import math
import os
import threading
import time
from typing import Callable, Optional


class ControlLoop:
    """Calls tick() every period_s, phase kept: a late tick does not bring a burst of the
    ones it missed, the next comes at the next multiple of the period."""

    def __init__(self, period_s: float, tick: Callable[[], None], name: str = "oxygen-control",
                 clock: Callable[[], float] = time.monotonic):
        self.period_s, self.tick, self.clock = period_s, tick, clock
        self.error: Optional[Exception] = None      # what ended the ticks, if a tick raised
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """No tick starts after this returns (one in progress finishes first)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def ticking(self) -> bool:
        """Started and neither stopped nor ended by a tick that raised."""
        return self._thread.is_alive()

    def _run(self) -> None:
        due = self.clock() + self.period_s
        try:
            while not self._stop.wait(max(0.0, due - self.clock())):
                self.tick()
                due = next_due(due, self.clock(), self.period_s)
        except Exception as error:   # the thread's excepthook prints the traceback
            self.error = error
            raise


def next_due(due: float, now: float, period_s: float) -> float:
    """The tick after the one due at `due`, skipping whole periods that `now` has passed."""
    missed = math.floor((now - due) / period_s) if now > due else 0
    return due + (missed + 1) * period_s


def real_time_scheduling(priority: int) -> tuple[bool, str]:
    """Put the calling thread, and the threads it starts from now on, under SCHED_FIFO at
    priority (1-99; 0 leaves it alone); (refused, how it is scheduled). A process calls it
    before starting any thread: a thread under the normal scheduler that holds the
    interpreter lock when a tick is due makes the tick wait for the CPU like any other."""
    if priority == 0:
        return False, "normal scheduler (control_priority 0)"
    try:
        os.sched_setscheduler(threading.get_native_id(), os.SCHED_FIFO,
                              os.sched_param(priority))
    except (OSError, AttributeError) as error:   # no CAP_SYS_NICE or rtprio limit; not Linux
        return True, (f"normal scheduler: SCHED_FIFO {priority} refused ({error}); allow it "
                      "with an rtprio limit (limits.conf) or CAP_SYS_NICE")
    return False, f"SCHED_FIFO priority {priority}"
