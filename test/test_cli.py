"""Every oxygen-ros verb works from a new shell after `make setup`: no AMENT_PREFIX_PATH,
no sourced setup file, only PATH and HOME."""

import subprocess
import sys
from pathlib import Path

import pytest

CLI = Path(sys.prefix) / "bin" / "oxygen-ros"
VERBS = ["demo", "run", "replay", "make-demo-bag", "inspect", "bench", "bench-model"]


def clean_shell(*args):
    return subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", f"HOME={Path.home()}",
                           str(CLI), *args], capture_output=True, text=True, timeout=120)


def test_help_works_from_a_clean_environment():
    result = clean_shell("--help")
    assert result.returncode == 0, result.stderr
    assert all(verb in result.stdout for verb in VERBS)


@pytest.mark.parametrize("verb", VERBS)
def test_each_verbs_help_works_from_a_clean_environment(verb):
    result = clean_shell(verb, "--help")
    assert result.returncode == 0 and "usage: oxygen-ros" in result.stdout, result.stderr


def test_make_demo_bag_runs_from_a_clean_environment(tmp_path):
    result = clean_shell("make-demo-bag", str(tmp_path / "bag"), "--duration", "1")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "bag" / "metadata.yaml").exists()
