"""Starts camera_ingest and inference with a parameters YAML.

Each parameter is the code's default (docs/parameters.md) unless config_file (default:
the preset's shipped YAML, config/humanoid.yaml for small; one that does not exist is an
error) sets it; the arguments preset, checkpoint, tokenizer, dry_run and autostart override
both, only when given. When a node exits, the whole launch shuts down (respawn:=true
restarts it instead). Also: use_sim_time, and the joint states and command output topics.
A robot of a fleet: namespace:=<robot> puts both nodes under /<robot> and every topic but
/diagnostics under /<robot>/, and inference:=remote starts only camera_ingest
(fleet.launch.py starts the server). The decisions live in oxygen_ros.ros.launch_plan
(tested without launch_ros)."""

from pathlib import Path

from launch import LaunchDescription, logging
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from oxygen_ros.ros import launch_plan

ARGUMENTS = {
    "config_file": ("", "parameters YAML for camera_ingest and inference; one that does "
                        "not exist stops the launch (default: the preset's shipped YAML, "
                        "humanoid.yaml for small)"),
    **launch_plan.MODEL_ARGUMENTS,
    "respawn": ("false", "restart a node that exits instead of shutting everything down"),
    "joint_states_topic": ("", "robot joint states (default: the YAML's, /joint_states, "
                               "under the namespace)"),
    "command_topic": ("", "per-step Float64MultiArray commands (default: the YAML's, "
                          "/oxygen/joint_command, under the namespace)"),
    "trajectory_topic": ("", "JointTrajectory per chunk (default: the YAML's, "
                             "/oxygen/joint_trajectory, under the namespace)"),
    "namespace": ("", "this robot's name in a fleet: both nodes under /<name>, every topic "
                      "but /diagnostics under /<name>/ (a fleet server's robots list "
                      "names it)"),
    "inference": ("local", "local: start inference here; remote: only camera_ingest, for a "
                           "fleet server elsewhere (needs namespace)"),
}


def _nodes(context):
    arguments = {name: LaunchConfiguration(name).perform(context) for name in ARGUMENTS}
    for warning in launch_plan.ignored_arguments(context.launch_configurations, ARGUMENTS,
                                                 ("camera_ingest", "inference")):
        logging.get_logger("launch.user").warning(warning)
    share = FindPackageShare("oxygen_ros").perform(context)
    config = launch_plan.config_file(arguments, Path(share) / "config")
    namespace = launch_plan.robot_namespace(arguments)
    respawn = launch_plan.on_node_exit(arguments) == "respawn"
    exit_policy = dict(respawn=True, respawn_delay=2.0) if respawn else dict(on_exit=Shutdown())
    placed = dict(namespace=namespace) if namespace else {}

    def node(executable):
        # one file, as rcl types it: launch_ros given a dict would type `on` a bool
        parameters = launch_plan.parameters_file(
            launch_plan.node_parameters(arguments, config, executable), f"{executable}-")
        return Node(package="oxygen_ros", executable=executable, name=executable,
                    parameters=[parameters], output="screen", **placed, **exit_policy)

    nodes = [node("camera_ingest")]
    if launch_plan.starts_inference(arguments):
        nodes.append(node("inference"))
    return nodes


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([
        *(DeclareLaunchArgument(name, default_value=default, description=description)
          for name, (default, description) in ARGUMENTS.items()),
        OpaqueFunction(function=_nodes),
    ])
