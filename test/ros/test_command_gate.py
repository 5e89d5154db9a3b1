"""The control tick's logic without ROS: the watchdog trips once and resumes, a command is
clamped and counted, NaN is skipped, held steps are counted, hold repeats the last command;
a chunk from before a stop is outdated."""

from collections import Counter

import numpy as np

from oxygen_ros.ros.command_gate import CommandGate, StopMark

WATCHDOG_S = 0.1


def gate(hold=False):
    return CommandGate([-1.0, -1.0], [1.0, 1.0], WATCHDOG_S, hold, Counter())


def test_a_fresh_observation_lets_the_clamped_command_through_and_counts_the_clamps():
    g = gate()
    tick = g.tick(0.05, lambda: (np.array([0.5, 3.0]), 0))
    assert tick.resumed and not tick.tripped and not tick.after_trip     # a start
    np.testing.assert_array_equal(tick.command, [0.5, 1.0])
    assert g.counters["clamped_values"] == 1
    assert not g.tick(0.05, lambda: (np.array([0.0, 0.0]), 0)).resumed   # once only


def test_the_watchdog_trips_once_when_observations_age_and_resumes_when_they_come_back():
    g = gate()
    g.tick(0.0, lambda: (np.zeros(2), 0))
    asked = []
    stale = [g.tick(age, lambda: asked.append(1)) for age in (0.11, 0.2, None)]
    assert [t.tripped for t in stale] == [True, False, False]
    assert all(t.command is None for t in stale) and not asked   # no new action asked for
    assert g.stale and g.counters["watchdog_trips"] == 1
    back = g.tick(WATCHDOG_S, lambda: (np.zeros(2), 0))
    assert back.resumed and back.after_trip and back.command is not None and not g.stale
    g.tick(0.2, lambda: None)
    g.restart()                      # deactivated after a trip: the next fresh one starts
    start = g.tick(0.0, lambda: (np.zeros(2), 0))
    assert start.resumed and not start.after_trip


def test_no_observation_yet_is_stale_without_a_trip():
    g = gate()
    tick = g.tick(None, lambda: (np.zeros(2), 0))
    assert tick.command is None and not tick.tripped and g.counters["watchdog_trips"] == 0


def test_hold_repeats_the_last_command_while_stale():
    g = gate(hold=True)
    assert g.tick(None, lambda: None).command is None            # nothing to hold yet
    g.tick(0.0, lambda: (np.array([0.2, -2.0]), 0))
    for age in (0.5, 1.0):
        np.testing.assert_array_equal(g.tick(age, lambda: None).command, [0.2, -1.0])
    # observations are back before a fresh chunk: still held (and counted), not silence
    tick = g.tick(0.0, lambda: None)
    assert tick.resumed and g.counters["held_commands"] == 1
    np.testing.assert_array_equal(tick.command, [0.2, -1.0])
    np.testing.assert_array_equal(g.tick(0.0, lambda: (np.array([0.5, 0.5]), 0)).command,
                                  [0.5, 0.5])
    g.restart()                      # deactivated and activated again: nothing from before
    assert g.tick(0.0, lambda: None).command is None and g.tick(1.0, lambda: None).command is None


def test_a_non_finite_command_is_skipped_and_not_held():
    g = gate(hold=True)
    g.tick(0.0, lambda: (np.array([0.1, 0.1]), 0))
    tick = g.tick(0.0, lambda: (np.array([np.nan, 0.0]), 0))
    assert tick.non_finite and tick.command is None
    np.testing.assert_array_equal(g.last_command, [0.1, 0.1])


def test_steps_past_the_chunks_end_are_counted_as_held():
    g = gate()
    g.tick(0.0, lambda: (np.zeros(2), 1))
    g.tick(0.0, lambda: (np.zeros(2), 0))
    assert g.counters["held_commands"] == 1
    assert g.tick(0.0, lambda: None).command is None              # no chunk yet


def test_clip_clamps_a_whole_chunk_per_joint():
    np.testing.assert_array_equal(gate().clip(np.array([[2.0, -2.0], [0.3, 0.4]])),
                                  [[1.0, -1.0], [0.3, 0.4]])


def test_a_chunk_from_before_a_stop_is_outdated_and_one_from_after_it_is_not():
    tick = 0.02
    marks = StopMark(WATCHDOG_S, tick)
    assert not marks.outdated(1.0)                  # no stop yet
    for arrival in (1.0, 1.05, 1.1):                # gaps within the watchdog
        marks.observation(arrival)
    assert not marks.outdated(1.0) and not marks.outdated(1.1)
    marks.stop(1.1)                                 # the watchdog trips on 1.1
    assert marks.outdated(1.0) and marks.outdated(1.1)
    marks.observation(1.5)
    marks.stop(1.1)                                 # a stop judged on 1.1 as 1.5 came in
    assert not marks.outdated(1.5) and not marks.outdated(float("nan"))   # nan: unknown
    # a gap longer than the watchdog but shorter than a tick more: no tick need have seen it
    marks.observation(1.5 + WATCHDOG_S + tick / 2)
    assert not marks.outdated(1.5)
    newest = 1.5 + WATCHDOG_S + tick / 2
    marks.observation(newest + WATCHDOG_S + tick * 1.5)    # one no tick can miss: a stop
    assert marks.outdated(newest) and not marks.outdated(newest + WATCHDOG_S + tick * 1.5)
