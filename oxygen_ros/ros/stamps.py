"""ROS time stamps <-> nanoseconds and seconds."""

from builtin_interfaces.msg import Time

NS = 1_000_000_000


def stamp_ns(stamp) -> int:
    return stamp.sec * NS + stamp.nanosec


def to_seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def time_from_ns(nanoseconds: int) -> Time:
    sec, nanosec = divmod(int(nanoseconds), NS)
    return Time(sec=sec, nanosec=nanosec)

