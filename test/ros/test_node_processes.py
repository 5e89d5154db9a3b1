"""`oxygen-ros run` starts each node in its own process, as the launch file does, and
stops them with hard timeouts: SIGINT, then SIGKILL (rclpy traps SIGTERM)."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rclpy.node import Node

from graph_helpers import executable

from oxygen_ros.ros.node_processes import stop_children, supervise

NODES = {"camera_ingest", "inference"}
REPO = Path(__file__).resolve().parents[2]


def wait_for_line(child, text: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and child.poll() is None:
        found = [line for line in list(child.lines) if text in line]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} in {''.join(child.lines)[-3000:]}")


def parent_pid(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return int(next(line for line in status if line.startswith("PPid")).split()[1])


def node_names(context, until, timeout_s: float = 60.0) -> set:
    node = Node("run_observer", context=context)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not until(set(node.get_node_names())):
            time.sleep(0.1)
        return set(node.get_node_names())
    finally:
        node.destroy_node()


def test_a_child_that_ignores_sigint_is_killed_after_the_grace_period():
    ignoring = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, "
         "signal.SIG_IGN); print('ready', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, text=True)
    polite = subprocess.Popen(
        [sys.executable, "-c", "import signal, sys, time; signal.signal(signal.SIGINT, lambda "
         "*_: sys.exit(3)); print('ready', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, text=True)
    assert ignoring.stdout.readline() == polite.stdout.readline() == "ready\n"
    stop_children([ignoring, polite], grace_s=1.0)
    assert ignoring.returncode == -signal.SIGKILL
    assert polite.returncode == 3            # left on the SIGINT, not killed


def test_a_run_that_ran_its_duration_fails_if_a_node_failed_as_it_was_stopped():
    def child(on_sigint: str, lives_s: int = 600):
        started = subprocess.Popen(
            [sys.executable, "-c", "import signal, sys, time; signal.signal(signal.SIGINT, "
             f"lambda *_: sys.exit({on_sigint})); print('ready', flush=True); "
             f"time.sleep({lives_s})"], stdout=subprocess.PIPE, text=True)
        assert started.stdout.readline() == "ready\n"
        return started

    # a node stopped cleanly at the duration: 0; one that fails then (its configure failed
    # after the duration ran out): its exit code, not 0
    assert supervise([child("0"), child("0")], threading.Event(), duration=0.1) == 0
    assert supervise([child("0"), child("1")], threading.Event(), duration=0.1) == 1
    # one ended on its own, cleanly (a terminal's Ctrl-C reached it first): the other's
    # failure as it was stopped still counts
    assert supervise([child("0", lives_s=0), child("1")], threading.Event()) == 1


def test_supervise_names_the_child_that_ended_or_failed(capsys):
    def child(code: int, lives_s: int):
        started = subprocess.Popen(
            [sys.executable, "-c", "import signal, sys, time; signal.signal(signal.SIGINT, "
             f"lambda *_: sys.exit({code})); print('ready', flush=True); "
             f"time.sleep({lives_s}); sys.exit({code})"], stdout=subprocess.PIPE, text=True)
        assert started.stdout.readline() == "ready\n"     # its SIGINT handler is in place
        started.stdout.close()
        return started

    ended = child(1, 0)
    assert supervise([child(0, 600), ended], threading.Event(),
                     names=["camera_ingest", "inference"]) == 1
    assert capsys.readouterr().err == (f"inference (pid {ended.pid}) exited with code 1; "
                                       "stopping the others\n")
    failing = child(4, 600)
    assert supervise([failing, child(0, 600)], threading.Event(), duration=0.5,
                     names=["camera_ingest", "inference"]) == 4
    assert capsys.readouterr().err == (f"camera_ingest (pid {failing.pid}) failed as it was "
                                       "stopped, with code 4\n")
    killed = child(0, 600)
    killed.kill()
    assert supervise([killed], threading.Event(), names=["inference"]) == 128 + 9
    assert capsys.readouterr().err == (f"inference (pid {killed.pid}) was killed by signal 9; "
                                       "stopping the others\n")


def test_run_starts_each_node_in_its_own_process_and_sigterm_stops_both(processes,
                                                                       rclpy_context):
    run = processes.python("-m", "oxygen_ros.cli", "run", "--preset", "tiny")
    line = wait_for_line(run, "camera_ingest pid", 60.0)
    pids = [int(word.rstrip(",")) for word in line.split() if word.rstrip(",").isdigit()]
    assert len(pids) == 2 and run.pid not in pids, line
    assert [parent_pid(pid) for pid in pids] == [run.pid, run.pid]
    assert "humanoid_tiny.yaml" in line, line      # the preset's YAML, as the launch plan
    names = node_names(rclpy_context, until=lambda names: NODES <= names)
    assert NODES <= names, names
    run.send_signal(signal.SIGTERM)                # to the parent only: it stops the nodes
    output = processes.finish(run, timeout=60)
    assert run.returncode == 0, output[-3000:]
    for pid in pids:                               # reaped by the parent: gone
        assert not os.path.exists(f"/proc/{pid}"), pid
    assert "Traceback" not in output, output[-3000:]


def test_run_serving_robots_starts_each_robots_ingest_in_its_namespace(processes,
                                                                      rclpy_context):
    """An inference node that serves robots gets each robot's camera_ingest under /<robot>/
    (as fleet.launch.py and humanoid.launch.py namespace:=<robot> inference:=remote), all
    children of run, stopped together."""
    run = processes.python("-m", "oxygen_ros.cli", "run", "--preset", "tiny",
                           "-p", "inference:robots:=[alpha, beta]")
    line = wait_for_line(run, "inference pid", 60.0)
    assert "/alpha/camera_ingest pid" in line and "/beta/camera_ingest pid" in line, line
    pids = [int(word.rstrip(",")) for word in line.split() if word.rstrip(",").isdigit()]
    assert len(pids) == 3 and [parent_pid(pid) for pid in pids] == [run.pid] * 3, line
    observer = Node("run_observer", context=rclpy_context)
    wanted = {("camera_ingest", "/alpha"), ("camera_ingest", "/beta"), ("inference", "/")}
    try:
        deadline = time.monotonic() + 60.0
        while (not wanted <= set(observer.get_node_names_and_namespaces())
               and time.monotonic() < deadline):
            time.sleep(0.1)
        assert wanted <= set(observer.get_node_names_and_namespaces())
    finally:
        observer.destroy_node()
    assert "robots alpha, beta;" in wait_for_line(run, "robots alpha, beta", 120.0)
    for robot in ("alpha", "beta"):
        assert f"-> /{robot}/oxygen/observation" in wait_for_line(
            run, f"[{robot}.camera_ingest]: cameras ", 60.0)
    run.send_signal(signal.SIGTERM)
    output = processes.finish(run, timeout=60)
    assert run.returncode == 0, output[-3000:]
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)
    assert "feeds none of them" not in output and "Traceback" not in output, output[-3000:]


def test_run_stops_the_other_node_and_fails_when_one_node_fails(processes):
    run = processes.python("-m", "oxygen_ros.cli", "run", "--preset", "tiny",
                           "-p", "inference:checkpoint:=/no/such/checkpoint")
    output = processes.finish(run, timeout=120)
    assert run.returncode == 1, output[-3000:]
    assert "/no/such/checkpoint" in output and "Traceback" not in output, output[-3000:]
    line = next(line for line in output.splitlines() if "camera_ingest pid" in line)
    ingest_pid = int(line.split("camera_ingest pid ")[1].split(",")[0])
    assert not os.path.exists(f"/proc/{ingest_pid}")


@pytest.mark.parametrize("robots", ["1", "2"])
def test_the_demo_ends_at_once_naming_a_node_that_exits_before_it_reports(processes, robots):
    demo = processes.python("-m", "oxygen_ros.cli", "demo", "--robots", robots, "--duration",
                            "2", "-p", "inference:checkpoint:=/no/such/checkpoint")
    output = processes.finish(demo, timeout=120)      # not READY_S (300 s) later
    assert demo.returncode == 1, output[-3000:]
    assert "oxygen-ros demo: inference (pid" in output, output[-3000:]
    assert "exited with code 1 before it reported, so nothing was replayed" in output
    assert "summary:" not in output and "Traceback" not in output, output[-3000:]


def test_a_parameter_given_with_another_type_than_the_files_still_wins(processes, tmp_path):
    """rcl given a file's 60 and a -p's 75.0 keeps the int; run writes one YAML instead."""
    config = tmp_path / "params.yaml"
    config.write_text((REPO / "config" / "humanoid_tiny.yaml").read_text().replace(
        "    preset: tiny\n", "    preset: tiny\n    control_rate_hz: 60\n"))
    run = processes.python("-m", "oxygen_ros.cli", "run", "--config", str(config),
                           "-p", "inference:control_rate_hz:=75.0")
    line = wait_for_line(run, "active: commands at", 120.0)
    assert "active: commands at 75 Hz" in line, line
    run.send_signal(signal.SIGTERM)
    output = processes.finish(run, timeout=60)
    assert run.returncode == 0, output[-3000:]


def test_each_robots_ingest_takes_the_runs_overrides_under_its_namespace(processes, tmp_path,
                                                                         monkeypatch):
    """The fleet demo's camera_ingests (node_processes.start_ingests): a -p for camera_ingest
    reaches /alpha/camera_ingest and /beta/camera_ingest, each on its robot's topics, and
    wins over a robot's own section in the YAML."""
    from oxygen_ros.cli.options import (chosen_config, node_parameter, node_ros_args,
                                        param_overrides)
    from oxygen_ros.ros.node_processes import start_ingests

    config = tmp_path / "own_sections.yaml"
    config.write_text(chosen_config({"preset": "tiny"}).read_text()
                      + "/alpha/camera_ingest:\n  ros__parameters:\n    image_size: 64\n")
    arguments = {"preset": "tiny", "config_file": str(config)}
    given = [node_parameter("camera_ingest:image_size:=96")]
    ros_args = node_ros_args(arguments, chosen_config(arguments), given)
    monkeypatch.setenv("ROS_DOMAIN_ID", str(processes.domain))
    log = tmp_path / "ingests.log"
    with log.open("w") as output:
        ingests = start_ingests(ros_args, ["alpha", "beta"], tmp_path, output,
                                param_overrides(given)["camera_ingest"])
    try:
        deadline = time.monotonic() + 120.0
        while (log.read_text().count("camera_ingest]: cameras ") < 2
               and time.monotonic() < deadline
               and all(ingest.poll() is None for ingest in ingests)):
            time.sleep(0.1)
    finally:
        stop_children(ingests)
    text = log.read_text()
    for robot in ("alpha", "beta"):
        line = next((line for line in text.splitlines()
                     if f"[{robot}.camera_ingest]: cameras " in line), text[-3000:])
        assert f"-> /{robot}/oxygen/observation at 96px" in line, line


def test_more_cameras_than_the_model_was_made_for_are_read_with_a_warning(processes):
    """The tiny model was made for 2 cameras; given 3 it reads all 3, and says so."""
    node = processes.start(executable("inference"), "--ros-args", "-p", "preset:=tiny",
                           "-p", "camera_names:=[a, b, c]", "-p", "joint_names:=[j0, j1]",
                           "-p", "joint_lower_limits:=[-1.0, -1.0]",
                           "-p", "joint_upper_limits:=[1.0, 1.0]")
    line = wait_for_line(node, "cameras but the model", 120.0)
    assert ("3 cameras but the model was made for 2: every camera is read, in a longer "
            "prefix than it saw in training") in line, line
    wait_for_line(node, "active: commands at", 120.0)


@pytest.mark.parametrize("args, reason", [
    (("-p", "temperature:=hot"), "temperature must be a number, not 'hot'"),
    (("-p", "control_rate_hz:=-5.0"), "control_rate_hz out of range"),
    (("--params-file", "MIXED"), "Couldn't parse params file"),
    (("--param-file", "MIXED"), "unknown ROS arguments ['--param-file'")])
def test_a_node_started_alone_refuses_what_it_cannot_take_in_one_line(processes, tmp_path,
                                                                     args, reason):
    """As `ros2 run` starts it, with nothing of the CLI's checks in front."""
    mixed = tmp_path / "mixed.yaml"    # rcl refuses a list of ints and doubles
    mixed.write_text("inference:\n  ros__parameters:\n    joint_lower_limits: [-1, 1.5]\n")
    node = processes.start(executable("inference"), "--ros-args", "-p", "preset:=tiny",
                           *[str(mixed) if a == "MIXED" else a for a in args])
    output = processes.finish(node, timeout=120)
    assert node.returncode == 1, output[-3000:]
    assert reason in output and "Traceback" not in output, output[-3000:]


def test_single_process_runs_both_nodes_in_the_command_itself(processes, rclpy_context):
    run = processes.python("-m", "oxygen_ros.cli", "run", "--preset", "tiny",
                           "--single-process")
    names = node_names(rclpy_context, until=lambda names: NODES <= names)
    assert NODES <= names, (names, "".join(run.lines)[-3000:])
    assert not any("camera_ingest pid" in line for line in run.lines)
    run.send_signal(signal.SIGTERM)
    output = processes.finish(run, timeout=60)
    assert run.returncode == 0, output[-3000:]
