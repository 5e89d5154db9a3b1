"""lost_responses counts every "failed to send response" RuntimeWarning rclpy issues and
shows only the first, as Python's default filter would; other warnings pass through
untouched. In a fresh interpreter: pytest's own warning capture would stand in for the
process's."""

import subprocess
import sys

SCRIPT = r'''
import sys
import warnings
from oxygen_ros.ros import lost_responses

def send():      # one place in the code, as rclpy's send_goal_response call is
    warnings.warn("failed to send response (timeout): client will not receive response",
                  RuntimeWarning)

send()           # before install: Python's own handling, not counted
with warnings.catch_warnings():   # as pytest runs each test: the hook goes at the end
    lost_responses.install()
    send()
send()           # not counted
lost_responses.install()
lost_responses.install()
sys.stderr.write("-- mark --\n")
send()
send()
warnings.warn("something else", RuntimeWarning)
print("count", lost_responses.count())
'''


def test_every_lost_response_is_counted_and_the_first_shown():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["count", "3"]
    before, after = run.stderr.split("-- mark --")
    assert "failed to send response" in before, run.stderr
    assert "failed to send response" not in after, run.stderr   # counted, not shown again
    assert after.count("something else") == 1, run.stderr
