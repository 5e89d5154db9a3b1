"""A problem is logged once per burst for each source: one camera's bad frames do not hide
another's, and a burst from one source stays quiet."""

import logging

from oxygen_ros.ros.diagnostics import BurstLogger


def test_each_source_of_a_kind_is_logged_once_per_burst(caplog):
    problems = BurstLogger(logging.getLogger("burst"), quiet_s=60.0)
    with caplog.at_level(logging.WARNING, logger="burst"):
        for _ in range(3):
            problems.warn("future", "/cameras/base: 5 s ahead", "/cameras/base")
            problems.warn("future", "/joint_states: 5 s ahead", "/joint_states")
            problems.warn("stale", "/joint_states: 2 s old", "/joint_states")
    assert [r.getMessage().split(" (counted")[0] for r in caplog.records] == [
        "future: /cameras/base: 5 s ahead", "future: /joint_states: 5 s ahead",
        "stale: /joint_states: 2 s old"]
