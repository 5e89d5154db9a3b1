"""Fixtures for tests that talk real DDS: a private domain per test, child processes with
hard timeouts (rclpy traps SIGTERM), and an rclpy context bound to that domain."""

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_BASE_DOMAIN = int(os.environ["ROS_DOMAIN_ID"])
_domains = itertools.cycle(range(_BASE_DOMAIN, _BASE_DOMAIN + 30))


def _next_domain() -> int:
    return next(_domains) % 200


@pytest.fixture
def ros_domain() -> int:
    """A DDS domain no other test of this run uses at the same time."""
    return _next_domain()


class Processes:
    """Child processes on one DDS domain; their output is collected as they run (a full
    pipe would block a chatty child) and they are stopped with a hard timeout."""

    def __init__(self, domain: int):
        self.domain = domain
        self.children = []

    def start(self, *argv, env=None, stdin=None) -> subprocess.Popen:
        # Children import the checkout's sources first, like the test process does.
        child_env = dict(os.environ, ROS_DOMAIN_ID=str(self.domain), PYTHONPATH=str(REPO),
                         ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1",
                         **(env or {}))
        child = subprocess.Popen([str(a) for a in argv], cwd=REPO, env=child_env, stdin=stdin,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
        child.lines = []
        child.drain = threading.Thread(target=lambda: child.lines.extend(child.stdout),
                                       daemon=True)
        child.drain.start()
        self.children.append(child)
        return child

    def python(self, *argv, env=None, stdin=None) -> subprocess.Popen:
        return self.start(sys.executable, *argv, env=env, stdin=stdin)

    @staticmethod
    def finish(child, timeout: float) -> str:
        """Wait for a child to exit; everything it printed (also in the failure if it does
        not exit in time)."""
        try:
            child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{child.args} still running after {timeout} s; it printed:\n"
                                 + "".join(child.lines)[-3000:]) from None
        child.drain.join(timeout=5.0)
        return "".join(child.lines)

    def stop_all(self, grace_s: float = 3.0) -> None:
        self.stop(*self.children, grace_s=grace_s)

    def stop(self, *children, grace_s: float = 3.0) -> None:
        """SIGINT to each child's process group, SIGKILL after grace_s to what is left of
        the group (the child, or a grandchild stuck where SIGINT does not reach it)."""
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGINT)
        deadline = time.monotonic() + grace_s
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            child.drain.join(timeout=2.0)



@pytest.fixture
def processes(ros_domain):
    procs = Processes(ros_domain)
    yield procs
    procs.stop_all()


def _context(domain):
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context, domain_id=domain)
    return context


@pytest.fixture
def rclpy_context(ros_domain):
    """An initialised rclpy Context on the test's domain; shut down afterwards."""
    import rclpy

    context = _context(ros_domain)
    yield context
    rclpy.shutdown(context=context)


@pytest.fixture(scope="module")
def module_graph_domain():
    """A domain, child processes and an rclpy context shared by one test module."""
    import rclpy

    domain = _next_domain()
    procs = Processes(domain)
    context = _context(domain)
    yield procs, context
    rclpy.shutdown(context=context)
    procs.stop_all()


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


# -- model fixtures (plain PyTorch, no ROS) ------------------------------------------------

@pytest.fixture(scope="session", autouse=True)
def torch_threads_as_the_nodes_use_them():
    """Torch in the test process takes the nodes' default (all cores but one): with every
    core in the pool, one busy core elsewhere stalls each parallel region (2 threads beside
    a busy loop on 2 cores: a small matmul 3x slower than 1 thread)."""
    from oxygen_ros.engine.threads import apply_torch_threads
    apply_torch_threads(0)


CAMERAS = ("base", "left_wrist", "right_wrist")


def random_images(config, seed: int, cameras=None):
    import numpy as np
    rng = np.random.default_rng(seed)
    size = config.vision.image_size
    names = cameras if cameras is not None else CAMERAS[:config.num_cameras]
    return {name: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for name in names}


@pytest.fixture
def make_prefix():
    """make_prefix(config, seed=0, instruction=..., state_seed=None, cameras=None) -> Prefix."""
    import numpy as np

    from oxygen_ros.model.prefix import build_prefix
    from oxygen_ros.model.prompt import pi05_prompt
    from oxygen_ros.model.tokenizer import ByteTokenizer

    def make(config, seed=0, instruction="pick up the red cup", state_seed=None, cameras=None):
        state = np.random.default_rng(seed if state_seed is None else state_seed).uniform(-1, 1, 14)
        tokens = ByteTokenizer().encode(pi05_prompt(instruction, state, config.state_dim))
        return build_prefix(config, CAMERAS[:config.num_cameras], random_images(config, seed, cameras),
                            tokens)
    return make


@pytest.fixture(scope="session")
def tiny_model():
    from oxygen_ros.model.config import preset
    from oxygen_ros.model.pi05 import Pi05Model
    return Pi05Model(preset("tiny"), seed=0).eval()
