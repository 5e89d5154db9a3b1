"""Named QoS profiles: each topic's reliability and durability chosen on purpose."""

from rclpy.qos import (
                       DurabilityPolicy,
                       HistoryPolicy,
                       QoSProfile,
                       ReliabilityPolicy,
                       qos_profile_sensor_data,
)

# Cameras and joint states: best effort, shallow — a late frame is worth less than a new one.
SENSOR = qos_profile_sensor_data

# Joint states: best effort as a sensor, but deep — at 100-500 Hz a short queue overflows
# whenever the subscriber's thread is briefly busy.
SENSOR_DEEP = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=50,
                         reliability=ReliabilityPolicy.BEST_EFFORT,
                         durability=DurabilityPolicy.VOLATILE)

# Observations and outputs between our nodes: reliable, a few deep, nothing latched.
RELIABLE = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10,
                      reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE)

# Streams where every message matters (dialogue text, requests): reliable and deep.
RELIABLE_DEEP = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000,
                           reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.VOLATILE)

# Per-step actions: reliable but depth 1 — a controller only wants the newest command.
COMMAND = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE)

# Task instruction: the last one published is delivered to late joiners.
LATCHED = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
