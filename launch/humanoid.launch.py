"""Starts camera_ingest and inference with the parameters in config/humanoid.yaml.

Arguments: config_file, preset, checkpoint, tokenizer, dry_run, use_sim_time, and topic
remappings for the joint states and the command outputs."""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

ARGUMENTS = {
    "config_file": (PathJoinSubstitution([FindPackageShare("oxygen_ros"), "config",
                                          "humanoid.yaml"]),
                    "parameters YAML for camera_ingest and inference"),
    "preset": ("small", "model preset: pi05, small or tiny (used without a checkpoint)"),
    "checkpoint": ("", "π0.5 checkpoint directory (openpi PyTorch or lerobot pi05 layout)"),
    "tokenizer": ("", "PaliGemma SentencePiece .model file (needed with a checkpoint)"),
    "dry_run": ("true", "compute and report, but publish no commands or trajectories"),
    "use_sim_time": ("false", "use /clock (true when replaying bags with --clock)"),
    "joint_states_topic": ("/joint_states", "robot joint states"),
    "command_topic": ("/oxygen/joint_command", "per-step Float64MultiArray commands"),
    "trajectory_topic": ("/oxygen/joint_trajectory", "JointTrajectory per chunk"),
}


def generate_launch_description() -> LaunchDescription:
    config = LaunchConfiguration("config_file")
    sim_time = {"use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"),
                                               value_type=bool)}
    return LaunchDescription([
        *(DeclareLaunchArgument(name, default_value=default, description=description)
          for name, (default, description) in ARGUMENTS.items()),
        Node(package="oxygen_ros", executable="camera_ingest", name="camera_ingest",
             parameters=[config, sim_time], output="screen",
             remappings=[("/joint_states", LaunchConfiguration("joint_states_topic"))]),
        Node(package="oxygen_ros", executable="inference", name="inference",
             parameters=[config, sim_time, {
                 "preset": LaunchConfiguration("preset"),
                 "checkpoint": LaunchConfiguration("checkpoint"),
                 "tokenizer": LaunchConfiguration("tokenizer"),
                 "dry_run": ParameterValue(LaunchConfiguration("dry_run"), value_type=bool)}],
             output="screen",
             remappings=[("/oxygen/joint_command", LaunchConfiguration("command_topic")),
                         ("/oxygen/joint_trajectory", LaunchConfiguration("trajectory_topic"))]),
    ])
