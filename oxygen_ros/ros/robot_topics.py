"""robot_topic: a robot's ROS names under /<robot>/ — how a fleet server's ports and a
namespaced robot's launch agree on them (no ROS)."""


def robot_topic(robot: str, name: str) -> str:
    """A topic or action name under the robot's namespace ("": as given)."""
    if not robot:
        return name
    return f"/{robot}{name}" if name.startswith("/") else f"{robot}/{name}"
