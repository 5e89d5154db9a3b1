"""Rosbag2 without rosbag2: replay any bag through rclpy (demo_bag.py writes the synthetic
demo bag).

Bags are read and written with the `rosbags` library (MCAP and sqlite3 storage). Replay
publishes each record's raw CDR bytes through an rclpy publisher of the recorded type, on
the recorded schedule (scaled by `rate`). Recorded stamps are kept by default (use
--clock with use_sim_time nodes, as with `ros2 bag play --clock`), or rewritten to the
current time (`restamp`) for nodes on the wall clock.
"""

import importlib
import math
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from rosbags.highlevel import AnyReader, AnyReaderError
from rosbags.interfaces import QosDurability, QosReliability
from rosbags.typesys import Stores, get_typestore

from oxygen_ros.ros.robot_topics import robot_topic

TYPESTORE = get_typestore(Stores.ROS2_KILTED)
NS = 1_000_000_000


def recorded_topics(path: str | Path) -> dict[str, int]:
    """A bag's topics and how many messages each holds, as its metadata says."""
    with AnyReader([Path(path)], default_typestore=TYPESTORE) as reader:
        counts: dict[str, int] = {}
        for connection in reader.connections:
            counts[connection.topic] = counts.get(connection.topic, 0) + connection.msgcount
    return dict(sorted(counts.items()))


def message_class(msgtype: str):
    """'sensor_msgs/msg/Image' -> the rclpy message class; None where no installed package
    defines it (a vendor's message type). A package that is there but fails to import
    raises its own error."""
    try:
        package, kind, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except ModuleNotFoundError as error:
        if error.name not in (package, f"{package}.{kind}"):
            raise
        return None
    except (ValueError, AttributeError):
        return None


def _header_first(msgtype: str, typestore) -> bool:
    """True if the type's first field is a std_msgs/Header (its stamp can be rewritten)."""
    fields = typestore.fielddefs.get(msgtype, ([], []))[1]
    return bool(fields) and fields[0][1][1] == "std_msgs/msg/Header"


@dataclass
class ReplayStats:
    published: int = 0
    loops: int = 0
    by_topic: dict = field(default_factory=dict)


# Topics the package latches (transient local): replayed latched even from a bag that
# recorded no QoS, so subscribers that start after the replay still get them.
LATCHED_TOPICS = ("/oxygen/instruction",)
QOS_KEYS = {"history": ("keep_last", "keep_all"), "reliability": ("reliable", "best_effort"),
            "durability": ("volatile", "transient_local")}


def load_qos_overrides(path: str | Path) -> dict:
    """A QoS override file as `ros2 bag play --qos-profile-overrides-path` takes it:
    topic: {history, depth, reliability, durability} (any subset)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not YAML ({' '.join(str(error).split())})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of topic -> QoS settings")
    for topic, settings in data.items():
        if not isinstance(settings, dict):
            raise ValueError(f"{path}: {topic}: expected a mapping of QoS settings")
        for key, value in settings.items():
            if key == "depth":
                if not isinstance(value, int) or value < 0:
                    raise ValueError(f"{path}: {topic}: depth must be a non-negative integer")
            elif key not in QOS_KEYS or str(value).lower() not in QOS_KEYS[key]:
                raise ValueError(f"{path}: {topic}: {key}: {value!r} is not one of "
                                 f"{QOS_KEYS.get(key, ('depth',) + tuple(QOS_KEYS))}")
    return data


def _replay_qos(connection, topic: str, overrides: dict):
    """The QoS a recorded topic is replayed with: as the bag recorded it offered, else
    reliable depth 10 (transient local depth 1 for the package's latched topics), then the
    user's overrides (history, depth, reliability, durability)."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    offered = connection.ext.offered_qos_profiles[:1] if connection.ext else []
    profile = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                         reliability=ReliabilityPolicy.RELIABLE)
    if offered:
        profile.depth = max(1, offered[0].depth)
        if offered[0].reliability == QosReliability.BEST_EFFORT:
            profile.reliability = ReliabilityPolicy.BEST_EFFORT
        if offered[0].durability == QosDurability.TRANSIENT_LOCAL:
            profile.durability = DurabilityPolicy.TRANSIENT_LOCAL
    elif topic in LATCHED_TOPICS:
        profile.depth, profile.durability = 1, DurabilityPolicy.TRANSIENT_LOCAL
    for name, value in overrides.items():
        value = value if name == "depth" else getattr(
            {"history": HistoryPolicy, "reliability": ReliabilityPolicy,
             "durability": DurabilityPolicy}[name], str(value).upper())
        setattr(profile, name, value)
    return profile


def check_readable(path: str | Path) -> None:
    """ValueError naming the bag if rosbags cannot open it (as BagReplayer opens it)."""
    try:
        with AnyReader([Path(path)], default_typestore=TYPESTORE):
            pass
    except (AnyReaderError, OSError) as error:
        raise ValueError(f"{path}: {error}") from None


class MissingTopics(ValueError):
    """Topics a replay names (`option`: topics or remap) that the bag has not recorded."""

    def __init__(self, option: str, path: Path, missing: Sequence[str], recorded: Sequence[str]):
        self.option = option
        super().__init__(f"{path} has no {', '.join(missing)} (its topics: "
                         f"{', '.join(recorded)})")


class UnknownTypes(ValueError):
    """Topics a replay names (`option`) whose message types no installed package defines."""

    def __init__(self, option: str, unknown: Sequence[str]):
        self.option = option
        super().__init__(f"no installed package defines the type of {', '.join(unknown)} "
                         "(source the workspace that builds it)")


class BagReplayer:
    """Publishes a bag's records through `node` on the recorded schedule.

    QoS per topic: what the bag recorded as offered, else reliable depth 10 (transient
    local for the package's latched topics); `qos_overrides` (load_qos_overrides) win."""

    def __init__(self, node, path: str | Path, rate: float = 1.0, loop: bool = False,
                 start_offset_s: float = 0.0, remap: Optional[dict] = None,
                 restamp: bool = False, clock_hz: float = 0.0,
                 topics: Optional[Sequence[str]] = None, qos_overrides: Optional[dict] = None,
                 namespace: str = ""):
        from rclpy.qos import DurabilityPolicy
        from rosgraph_msgs.msg import Clock

        if rate <= 0:
            raise ValueError("rate must be positive")
        self.node, self.path, self.rate, self.loop = node, Path(path), rate, loop
        self.start_offset_ns = int(start_offset_s * NS)
        self.remap, self.namespace = dict(remap or {}), namespace
        self.restamp = restamp
        self.stats = ReplayStats()
        self._reader = AnyReader([self.path], default_typestore=TYPESTORE)
        self._reader.open()
        try:
            self._connections = self._chosen(topics)
            self.skipped = self._installed(topics)   # "topic (type)" of each one left out
            if self.start_offset_ns and self.start_offset_ns >= self.duration_ns:
                raise ValueError(f"start offset {start_offset_s:g} s is past the end of the "
                                 f"bag ({self.duration_ns / NS:g} s)")
            if loop and self.duration_ns < NS // 1000:  # rosbags' end time is exclusive: +1 ns
                raise ValueError(f"{self.path} lasts less than 1 ms: it cannot loop")
        except ValueError:
            self._reader.close()
            raise
        self._publishers, self._restamp_topics, self._latched = {}, set(), set()
        for connection in self._connections:
            renamed = self.remap.get(connection.topic, connection.topic)
            topic = self._topic(connection)
            profile = _replay_qos(connection, renamed, (qos_overrides or {}).get(topic, {}))
            key = (topic, connection.msgtype)
            if profile.durability == DurabilityPolicy.TRANSIENT_LOCAL:
                self._latched.add(connection.id)
            if key not in self._publishers:
                self._publishers[key] = node.create_publisher(self._classes[connection.msgtype],
                                                              topic, profile)
            if _header_first(connection.msgtype, self._reader.typestore):
                self._restamp_topics.add(connection.id)
        self._clock_pub = node.create_publisher(Clock, "/clock", 10) if clock_hz > 0 else None
        self._clock_period = 1.0 / clock_hz if clock_hz > 0 else math.inf
        self._clock_class = Clock

    def _chosen(self, topics: Optional[Sequence[str]]) -> list:
        """The bag's connections to replay; every topic named (to replay or remap) must be
        one the bag recorded."""
        recorded = sorted({c.topic for c in self._reader.connections})
        for option, names in (("topics", topics or ()), ("remap", self.remap)):
            missing = sorted(set(names) - set(recorded))
            if missing:
                raise MissingTopics(option, self.path, missing, recorded)
        if not recorded:
            raise ValueError(f"{self.path} has no topics")
        chosen = [c for c in self._reader.connections if topics is None or c.topic in topics]
        if not sum(c.msgcount for c in chosen):
            raise ValueError(f"{self.path} holds no messages"
                             + (f" on {', '.join(sorted(topics))}" if topics else ""))
        return chosen

    def _installed(self, topics: Optional[Sequence[str]]) -> list[str]:
        """Keep the connections whose message types are installed here; the others are
        left out (as `ros2 bag play` does), unless named to replay or remap: an error."""
        self._classes = {t: message_class(t) for t in {c.msgtype for c in self._connections}}
        unknown = sorted({f"{c.topic} ({c.msgtype})" for c in self._connections
                          if self._classes[c.msgtype] is None})
        for option, names in (("topics", topics or ()), ("remap", self.remap)):
            named = sorted({f"{c.topic} ({c.msgtype})" for c in self._connections
                            if c.topic in names and self._classes[c.msgtype] is None})
            if named:
                raise UnknownTypes(option, named)
        self._connections = [c for c in self._connections if self._classes[c.msgtype]]
        if not self._connections:
            raise ValueError(f"no installed package defines the type of any of its topics: "
                             f"{', '.join(unknown)}")
        return unknown

    def wait_for_subscribers(self, timeout_s: float,
                             stop: Optional[threading.Event] = None) -> list[str]:
        """Wait until every replayed topic has a subscriber (or the timeout, or `stop`); the
        topics still without one."""
        deadline = time.monotonic() + timeout_s
        stop = stop or threading.Event()
        while True:
            missing = sorted(topic for (topic, _), pub in self._publishers.items()
                             if pub.get_subscription_count() == 0)
            if not missing or time.monotonic() >= deadline or stop.wait(0.05):
                return missing

    def type_mismatches(self) -> list[str]:
        """Each replayed topic whose subscribers (as the ROS graph knows them now) all take
        another message type than the bag's: DDS matches none of them, so none hears it."""
        found = []
        for topic, msgtype in self._publishers:
            types = {info.topic_type for info in self.node.get_subscriptions_info_by_topic(topic)}
            if types and msgtype not in types:
                found.append(f"{topic}: the bag holds {msgtype}, its subscribers take "
                             f"{' and '.join(sorted(types))}: none of them hears it")
        return found

    @property
    def duration_ns(self) -> int:
        return self._reader.end_time - self._reader.start_time

    @property
    def duration_s(self) -> float:
        return self.duration_ns / NS

    @property
    def stamps_headers(self) -> bool:
        """Whether any replayed topic's messages carry a header stamp (restamp rewrites it)."""
        return bool(self._restamp_topics)

    @property
    def recorded_s_ago(self) -> float:
        """How far in the past (by this host's clock) the replayed part of the bag is
        stamped (its record times)."""
        return time.time() - (self._reader.start_time + self.start_offset_ns) / NS

    def _publish_latched_before(self, bag_start: int) -> None:
        """With a start offset, latched topics (the task instruction) still get their last
        message recorded before it, as a late subscriber would have."""
        latched = [c for c in self._connections if c.id in self._latched]
        if not latched:     # (rosbags reads every connection when given none)
            return
        last = {}
        for connection, _, raw in self._reader.messages(connections=latched, stop=bag_start):
            last[connection.id] = (connection, raw)
        for connection, raw in last.values():
            self._publish(connection, raw)

    def _topic(self, connection) -> str:
        """Where a recorded topic is published: remapped, then under the namespace."""
        return robot_topic(self.namespace, self.remap.get(connection.topic, connection.topic))

    def _publish(self, connection, raw) -> None:
        data = bytes(raw)
        if self.restamp and connection.id in self._restamp_topics:
            data = restamp_cdr(data, time.time_ns())
        topic = self._topic(connection)
        self._publishers[(topic, connection.msgtype)].publish(data)
        self.stats.published += 1
        self.stats.by_topic[topic] = self.stats.by_topic.get(topic, 0) + 1

    def run(self, stop: Optional[threading.Event] = None) -> ReplayStats:
        """Publish until the bag ends (or forever with loop) or `stop` is set."""
        stop = stop or threading.Event()
        bag_start = self._reader.start_time + self.start_offset_ns
        if self.start_offset_ns:
            self._publish_latched_before(bag_start)
        while not stop.is_set():
            wall_start = time.monotonic()
            next_clock = 0.0
            for connection, timestamp, raw in self._reader.messages(
                    connections=self._connections, start=bag_start):
                due = wall_start + (timestamp - bag_start) / NS / self.rate
                while (delay := due - time.monotonic()) > 0:
                    if self._clock_pub is not None and time.monotonic() >= next_clock:
                        self._publish_clock(bag_start + int((time.monotonic() - wall_start)
                                                            * self.rate * NS))
                        next_clock = time.monotonic() + self._clock_period
                    if stop.wait(min(delay, self._clock_period)):
                        return self.stats
                if self._clock_pub is not None:
                    self._publish_clock(timestamp)
                self._publish(connection, raw)
            self.stats.loops += 1
            if not self.loop:
                break
        return self.stats

    def _publish_clock(self, time_ns: int) -> None:
        msg = self._clock_class()
        msg.clock.sec, msg.clock.nanosec = divmod(time_ns, NS)
        self._clock_pub.publish(msg)

    def close(self) -> None:
        self._reader.close()


def restamp_cdr(data: bytes, time_ns: int) -> bytes:
    """Rewrite the header stamp of a CDR message whose first field is std_msgs/Header.

    The stamp's sec (int32) and nanosec (uint32) sit right after the 4-byte encapsulation
    header, in the byte order that header names."""
    little = data[1] == 1
    sec, nanosec = divmod(time_ns, NS)
    return data[:4] + struct.pack("<iI" if little else ">iI", sec, nanosec) + data[12:]
