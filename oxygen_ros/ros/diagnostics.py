"""Builds diagnostic_msgs/DiagnosticStatus entries from plain counters (no diagnostic_updater)."""

from typing import Mapping

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

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


def _format(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)
