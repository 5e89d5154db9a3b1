"""The launch file starts both nodes from the package with the YAML its arguments select,
overrides only what was given, and shuts down (or respawns) when a node exits. Runs where
launch_ros exists (a ROS 2 install); the decisions themselves are tested without it in
test/ros/test_launch_plan.py."""

import importlib.util
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent

launch_ros = pytest.importorskip(
    "launch_ros", reason="launch_ros is not installable from pip; this test runs on a ROS 2 install")


def nodes_for(arguments: dict, launch_file: str = "humanoid.launch.py"):
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    from launch import LaunchContext, LaunchDescription

    spec = importlib.util.spec_from_file_location(launch_file.split(".")[0],
                                                  REPO / "launch" / launch_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    assert isinstance(description, LaunchDescription)
    declared = {e.name: e for e in description.entities if isinstance(e, DeclareLaunchArgument)}
    context = LaunchContext()
    for name, argument in declared.items():
        default = "".join(s.perform(context) for s in argument.default_value or [])
        context.launch_configurations[name] = arguments.get(name, default)
    (opaque,) = [e for e in description.entities if isinstance(e, OpaqueFunction)]
    return declared, opaque.execute(context)


def test_humanoid_launch_declares_its_arguments_and_starts_both_nodes():
    declared, nodes = nodes_for({})
    assert {"config_file", "preset", "checkpoint", "tokenizer", "dry_run", "autostart",
            "respawn", "use_sim_time", "joint_states_topic", "command_topic",
            "trajectory_topic"} <= set(declared)
    assert sorted(n.node_executable for n in nodes) == ["camera_ingest", "inference"]
    assert all(n.node_package == "oxygen_ros" for n in nodes)


def parameters_of(node) -> dict:
    """The YAML launch_plan wrote for a node, as rcl types it: the one file it is given."""
    from launch.utilities import perform_substitutions

    from launch import LaunchContext
    from oxygen_ros.ros import rcl_yaml

    (given,) = node._Node__parameters
    return rcl_yaml.load(Path(perform_substitutions(LaunchContext(), given.param_file))
                         .read_text())


def test_given_arguments_override_and_the_preset_picks_its_config():
    _, nodes = nodes_for({"preset": "tiny", "dry_run": "false"})
    inference = next(n for n in nodes if n.node_executable == "inference")
    tiny = yaml.safe_load((REPO / "config" / "humanoid_tiny.yaml").read_text())
    assert parameters_of(inference)["inference"]["ros__parameters"] == (
        tiny["inference"]["ros__parameters"] | {"preset": "tiny", "dry_run": False})


def test_a_namespaced_robot_finds_its_section_under_its_full_name():
    _, nodes = nodes_for({"preset": "tiny", "namespace": "alpha"})
    ingest = next(n for n in nodes if n.node_executable == "camera_ingest")
    section = parameters_of(ingest)["/alpha/camera_ingest"]["ros__parameters"]
    assert section["image_size"] == 28
    assert section["joint_state_topic"] == "/alpha/joint_states"


def test_the_fleet_server_finds_its_section_under_its_own_name():
    _, (server,) = nodes_for({"robots": "[alpha, beta]", "server": "rack_1", "preset": "tiny"},
                             "fleet.launch.py")
    assert server.node_executable == "inference"
    section = parameters_of(server)["/rack_1"]["ros__parameters"]
    assert section["robots"] == ["alpha", "beta"] and section["preset"] == "tiny"
    with pytest.raises(ValueError, match="robots:= names no robot"):   # robots:= misspelt
        nodes_for({"robot": "[alpha, beta]"}, "fleet.launch.py")
