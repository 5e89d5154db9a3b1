"""The control process's DDS settings: with Fast DDS, a participant without shared memory
(no ROS).

Fast DDS 2.14 (Jazzy) opens a new subscriber's shared-memory port while it holds the
command writer's lock, and waits there for the port's interprocess mutex, which every other
participant on the machine takes in turn to check the new port: each `ros2` command that
subscribed held the commands for 0.3-1.9 s. Commands are a few hundred bytes; UDP on
loopback costs microseconds. Other RMWs are left as they are."""

import os
from typing import Mapping

from oxygen_ros.resources import share_path

FAST_DDS = ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp")
# Fast DDS 3 (Kilted) reads the first, and warns that the second is deprecated;
# Fast DDS 2 (Jazzy) reads only the second
PROFILE_VARIABLES = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")
LOCALHOST_PROFILE = ("config", "fastdds_control_localhost.xml")


def control_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The control process's environment, from the node's."""
    env = dict(environ, PYTHONUNBUFFERED="1")
    if (env.get("RMW_IMPLEMENTATION") or "rmw_fastrtps_cpp") not in FAST_DDS:
        return env
    if localhost(env):
        # rmw_fastrtps 8.4 (Jazzy) adds shared memory to a LOCALHOST participant whatever
        # its profile says; this profile's locators keep SUBNET discovery on 127.0.0.1
        env.pop("ROS_LOCALHOST_ONLY", None)
        for variable in PROFILE_VARIABLES:
            env.pop(variable, None)
        env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "SUBNET"
        env[profile_variable(env)] = str(share_path(*LOCALHOST_PROFILE))
    elif not any(env.get(variable) for variable in PROFILE_VARIABLES):
        env["FASTDDS_BUILTIN_TRANSPORTS"] = "UDPv4"
    return env


def profile_variable(environ: Mapping[str, str]) -> str:
    """The profile variable the installed Fast DDS reads: Fast DDS 2 installs
    share/fastrtps in its prefix, Fast DDS 3 share/fastdds."""
    prefixes = environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep)
    fast_dds_2 = any(os.path.isdir(os.path.join(prefix, "share", "fastrtps"))
                     for prefix in prefixes if prefix)
    return PROFILE_VARIABLES[1] if fast_dds_2 else PROFILE_VARIABLES[0]


def localhost(environ: Mapping[str, str]) -> bool:
    return (environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") == "LOCALHOST"
            or environ.get("ROS_LOCALHOST_ONLY") == "1")
