"""The control loop's schedule: one tick per period, phase kept, no burst after a stall."""

import threading

import pytest

from oxygen_ros.ros.control_loop import ControlLoop, next_due


def test_next_due_keeps_the_phase_and_skips_missed_ticks():
    assert next_due(1.00, now=1.001, period_s=0.02) == pytest.approx(1.02)
    assert next_due(1.00, now=0.99, period_s=0.02) == pytest.approx(1.02)
    # 0.15 s late: the ticks at 1.02 ... 1.14 are gone, the next is on the grid at 1.16
    assert next_due(1.00, now=1.15, period_s=0.02) == pytest.approx(1.16)


def test_the_loop_ticks_until_stopped_and_not_after():
    ticks = []
    enough = threading.Event()

    def tick():
        ticks.append(1)
        if len(ticks) == 5:
            enough.set()

    loop = ControlLoop(0.001, tick)
    loop.start()
    assert enough.wait(30.0)
    loop.stop()
    count = len(ticks)
    assert not loop._thread.is_alive()
    assert len(ticks) == count


def test_the_loop_thread_runs_real_time_where_the_os_allows_and_says_so_where_not():
    import os
    seen = {}

    def tick():
        seen.setdefault("policy", os.sched_getscheduler(threading.get_native_id()))
        seen.setdefault("priority", os.sched_getparam(threading.get_native_id()).sched_priority)

    loop = ControlLoop(0.001, tick, priority=20)
    loop.start()
    while "priority" not in seen:
        threading.Event().wait(0.01)
    loop.stop()
    if loop.refused:   # not root, no rtprio limit
        assert seen == {"policy": os.SCHED_OTHER, "priority": 0}
        assert "refused" in loop.scheduling and "rtprio" in loop.scheduling
    else:
        assert seen == {"policy": os.SCHED_FIFO, "priority": 20}
        assert loop.scheduling == "SCHED_FIFO priority 20"
    assert os.sched_getscheduler(0) == os.SCHED_OTHER      # the rest of the process is not
    normal = ControlLoop(1.0, lambda: None, priority=0)
    normal.start()
    normal.stop()
    assert not normal.refused and "normal scheduler" in normal.scheduling
