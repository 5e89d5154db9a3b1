"""Starts one inference server for several robots: robots:="[alpha, beta]". One model, one
KV cache; each robot's chunks batched in one frame and its dialogue decoded with the
others', its topics and Ask action under /<robot>/, its own control process and
DiagnosticStatus. Each robot runs humanoid.launch.py with namespace:=<robot>
inference:=remote, over ROS 2's own transport (the RMW you choose). Servers sharing a
graph take different server:= names and disjoint robot lists (a robot named by two is an
ERROR both report). Parameters as in humanoid.launch.py: the preset's shipped YAML unless
config_file, the arguments overriding only when given. The decisions live in
oxygen_ros.ros.launch_plan (tested without launch_ros)."""

from pathlib import Path

from launch import LaunchDescription, logging
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from oxygen_ros.ros import launch_plan

ARGUMENTS = {
    # required, yet declared with a default: launch would refuse a missing one before a
    # misspelt robot:= could be named
    "robots": ("", "the robots this server serves, e.g. \"[alpha, beta]\" (required)"),
    "server": ("inference", "this server's node name (servers sharing a graph: one each)"),
    "config_file": ("", "parameters YAML (its inference section); default: the preset's "
                        "shipped YAML, humanoid.yaml for small"),
    **launch_plan.MODEL_ARGUMENTS,
    "respawn": ("false", "restart the server when it exits instead of shutting down"),
}


def _server(context):
    arguments = {name: LaunchConfiguration(name).perform(context) for name in ARGUMENTS}
    for warning in launch_plan.ignored_arguments(context.launch_configurations, ARGUMENTS,
                                                 ("inference",)):
        logging.get_logger("launch.user").warning(warning)
    share = FindPackageShare("oxygen_ros").perform(context)
    config = launch_plan.config_file(arguments, Path(share) / "config")
    respawn = launch_plan.on_node_exit(arguments) == "respawn"
    exit_policy = dict(respawn=True, respawn_delay=2.0) if respawn else dict(on_exit=Shutdown())
    parameters = launch_plan.parameters_file(launch_plan.fleet_parameters(arguments, config),
                                             f"{arguments['server']}-")
    return [Node(package="oxygen_ros", executable="inference", name=arguments["server"],
                 parameters=[parameters], output="screen", **exit_policy)]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([
        *(DeclareLaunchArgument(name, default_value=default, description=description)
          for name, (default, description) in ARGUMENTS.items()),
        OpaqueFunction(function=_server),
    ])
