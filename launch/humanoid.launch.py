"""Starts camera_ingest and inference with the parameters in config/humanoid.yaml."""

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare


def generate_launch_description() -> LaunchDescription:
    config_file = LaunchConfiguration("config_file")
    common = {"use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)}
    return LaunchDescription([
        DeclareLaunchArgument(
            "config_file",
            default_value=PathJoinSubstitution([FindPackageShare("oxygen_ros"), "config",
                                                "humanoid.yaml"]),
            description="parameters YAML for camera_ingest and inference"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="use /clock (true when replaying bags)"),
        Node(package="oxygen_ros", executable="camera_ingest", name="camera_ingest",
             parameters=[config_file, common], output="screen"),
        Node(package="oxygen_ros", executable="inference", name="inference",
             parameters=[config_file, common], output="screen"),
    ])
