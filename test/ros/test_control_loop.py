"""The control loop's schedule: one tick per period, phase kept, no burst after a stall; a
tick that raises ends the ticks, its error kept."""

import threading

import pytest

from oxygen_ros.ros.control_loop import ControlLoop, next_due, real_time_scheduling


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


def test_a_tick_that_raises_ends_the_ticks_and_is_kept(monkeypatch):
    monkeypatch.setattr(threading, "excepthook", lambda args: None)   # the traceback
    ticks = []

    def tick():
        ticks.append(1)
        if len(ticks) == 3:
            raise RuntimeError("publish failed")

    loop = ControlLoop(0.001, tick)
    loop.start()
    loop._thread.join(30.0)
    assert not loop.ticking() and len(ticks) == 3
    assert isinstance(loop.error, RuntimeError) and str(loop.error) == "publish failed"


def test_real_time_scheduling_where_the_os_allows_it_and_the_reason_where_not():
    import os
    seen = {}

    def scheduled_thread():
        seen["refused"], seen["scheduling"] = real_time_scheduling(20)
        child = threading.Thread(target=lambda: seen.setdefault(
            "child", (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)))
        child.start()
        child.join()
        seen["self"] = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)

    thread = threading.Thread(target=scheduled_thread)
    thread.start()
    thread.join()
    if seen["refused"]:   # not root, no rtprio limit
        assert seen["self"] == seen["child"] == (os.SCHED_OTHER, 0)
        assert "refused" in seen["scheduling"] and "rtprio" in seen["scheduling"]
    else:                  # the thread and the threads it starts
        assert seen["self"] == seen["child"] == (os.SCHED_FIFO, 20)
        assert seen["scheduling"] == "SCHED_FIFO priority 20"
    assert os.sched_getscheduler(0) == os.SCHED_OTHER      # the rest of the process is not
    assert real_time_scheduling(0) == (False, "normal scheduler (control_priority 0)")
