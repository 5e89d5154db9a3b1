"""Builds diagnostic_msgs/DiagnosticStatus entries from plain counters (no diagnostic_updater)."""

import time
import traceback
from typing import Mapping

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR


def status(name: str, hardware_id: str, level: bytes, message: str,
           values: Mapping[str, object]) -> DiagnosticStatus:
    return DiagnosticStatus(
        level=level, name=name, message=message, hardware_id=hardware_id,
        values=[KeyValue(key=k, value=_format(v)) for k, v in values.items()])


def array(stamp, *statuses: DiagnosticStatus) -> DiagnosticArray:
    msg = DiagnosticArray(status=list(statuses))
    msg.header.stamp = stamp
    return msg


def steady_timer(node, period_s: float, callback, **kwargs):
    """A timer of `node` on the host's steady clock: a node on use_sim_time has its own
    clock stop with /clock, and its diagnostics must not (a bag that ended, a simulator
    halted: then the watchdog's ERROR is what they have to say)."""
    return node.create_timer(period_s, callback, clock=Clock(clock_type=ClockType.STEADY_TIME),
                             **kwargs)


def _format(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def guarded(node, callback):
    """The callback behind a boundary: an exception is counted in node.counters as
    internal_error, logged with its traceback (throttled), and never raised."""
    def boundary(*args):
        try:
            return callback(*args)
        except Exception:  # noqa: BLE001 - a message must never stop the node
            node.counters["internal_error"] += 1
            node.get_logger().error(f"internal error in {callback.__name__} (counted): "
                                    f"{traceback.format_exc()}", throttle_duration_sec=10.0)
    return boundary


class BurstLogger:
    """Logs each kind of problem once per burst and source (a topic, a camera): after a
    message, that kind from that source stays quiet for quiet_s seconds (the counters in
    /diagnostics keep the full count)."""

    def __init__(self, logger, quiet_s: float = 5.0):
        self.logger, self.quiet_s = logger, quiet_s
        self._last: dict[tuple[str, str], float] = {}

    def warn(self, kind: str, text: str, source: str = "") -> None:
        now = time.monotonic()
        if now - self._last.get((kind, source), -self.quiet_s) >= self.quiet_s:
            self._last[(kind, source)] = now
            self.logger.warning(f"{kind}: {text} (counted in /diagnostics; quiet for "
                             f"{self.quiet_s:.0f} s)")
