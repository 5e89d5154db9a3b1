"""The node's messages to its control process and back decode to what was sent (no ROS)."""

import numpy as np

from oxygen_ros.ros import control_link


def test_messages_decode_to_what_was_sent():
    actions = np.arange(12, dtype=np.float64).reshape(4, 3)
    kind, (decoded, stamp, dt, now, observed) = control_link.decode(
        control_link.plan_message(actions, 10_500_000_001, 0.02, 10.6, 3.0))
    assert kind == control_link.PLAN and (stamp, dt, now, observed) == (10_500_000_001, 0.02,
                                                                        10.6, 3.0)
    np.testing.assert_array_equal(decoded, actions)
    assert control_link.decode(control_link.observed_message(3.25)) == (control_link.OBSERVED,
                                                                         (3.25,))
    assert control_link.decode(control_link.state_message(False)) == (control_link.STATE,
                                                                      (False,))
    kind, (increments, stale, sent_at, times) = control_link.decode(
        control_link.status_message([5, 1, 0, 2, 0, 1, 3], True, 7.0, [6.9, 6.92]))
    assert increments == dict(zip(control_link.COUNTERS, [5, 1, 0, 2, 0, 1, 3]))
    assert (kind, stale, sent_at, times) == (control_link.STATUS, True, 7.0, (6.9, 6.92))


def test_reports_come_every_tenth_of_a_second_and_are_overdue_after_four_or_a_second():
    assert [control_link.status_every(rate) for rate in (2.0, 50.0, 60.0, 1000.0)] == [
        5, 5, 6, 100]
    assert control_link.report_overdue(50.0) == 1.0          # reports every 0.1 s
    assert control_link.report_overdue(1000.0) == 1.0
    assert control_link.report_overdue(2.0) == 4 * 5 / 2.0   # every 2.5 s: 10 s
