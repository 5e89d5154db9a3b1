"""Fixtures for tests that talk real DDS: a private domain per test, child processes with
hard timeouts (rclpy traps SIGTERM), and an rclpy context bound to that domain."""

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_BASE_DOMAIN = int(os.environ["ROS_DOMAIN_ID"])
_domains = itertools.cycle(range(_BASE_DOMAIN, _BASE_DOMAIN + 30))


@pytest.fixture
def ros_domain() -> int:
    """A DDS domain no other test of this run uses at the same time."""
    return next(_domains) % 200


class Processes:
    def __init__(self, domain: int):
        self.domain = domain
        self.children = []

    def start(self, *argv, env=None) -> subprocess.Popen:
        # Children import the checkout's sources first, like the test process does.
        child_env = dict(os.environ, ROS_DOMAIN_ID=str(self.domain), PYTHONPATH=str(REPO),
                         ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1",
                         **(env or {}))
        child = subprocess.Popen([str(a) for a in argv], cwd=REPO, env=child_env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
        self.children.append(child)
        return child

    def python(self, *argv, env=None) -> subprocess.Popen:
        return self.start(sys.executable, *argv, env=env)

    def stop_all(self, grace_s: float = 3.0) -> None:
        for child in self.children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGINT)
        deadline = time.monotonic() + grace_s
        for child in self.children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()


@pytest.fixture
def processes(ros_domain):
    procs = Processes(ros_domain)
    yield procs
    procs.stop_all()


@pytest.fixture
def rclpy_context(ros_domain):
    """An initialised rclpy Context on the test's domain; shut down afterwards."""
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context, domain_id=ros_domain)
    yield context
    rclpy.shutdown(context=context)


@pytest.fixture
def spin_until():
    """spin_until(executor, condition, timeout_s): spin until condition() or the timeout."""
    def spin(executor, condition, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                return True
            executor.spin_once(timeout_sec=0.05)
        return condition()
    return spin
