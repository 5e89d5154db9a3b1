"""ROS time stamps <-> nanoseconds and seconds."""

import math

from builtin_interfaces.msg import Time

NS = 1_000_000_000


def stamp_ns(stamp) -> int:
    return stamp.sec * NS + stamp.nanosec


def to_seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def time_from_ns(nanoseconds: int) -> Time:
    sec, nanosec = divmod(int(nanoseconds), NS)
    return Time(sec=sec, nanosec=nanosec)


def to_time(seconds: float) -> Time:
    sec = math.floor(seconds)
    return Time(sec=int(sec), nanosec=min(int(round((seconds - sec) * NS)), NS - 1))
