"""What a demo run is judged by, as an outside subscriber sees it: a robot's summary (the
commands, answers and summaries received, and the inference node's final /diagnostics),
its summary line and the fleet line."""

from collections import Counter
from typing import Optional

SUMMARY_FROM_DIAGNOSTICS = (
    "frames", "deadline_misses", "commands", "held_commands", "held_command_fraction",
    "chunk_latency_ms_p50", "chunk_latency_ms_max", "action_path_ms_p95", "frame_period_s",
    "frame_period_s_measured", "predicted_frame_period_s", "predicted_held_fraction",
    "language_share", "chunk_age_ms", "language_floor", "language_tokens",
    "dialogue_requests", "timed_out_requests", "rejected_requests", "torch_threads",
    "kv_bytes_peak", "meets_targets", "chunk_switch", "rtc_chunks", "rtc_late_switches",
    "refused", "times_shed", "missing_camera")


# counted from the first one on: none yet where a status lacks them
COUNTED = ("dialogue_requests", "timed_out_requests", "rejected_requests", "missing_camera")


def answered(monitor) -> bool:
    """Every dialogue request the robot's status counts has its answer here."""
    diag = monitor.diagnostics.get(monitor.status_name, {})
    requests = int(diag.get("dialogue_requests", 0))
    return (diag.get("pending_dialogue") == "0"
            and len(monitor.finished_dialogue) >= requests)


def _diagnostic_value(text: Optional[str]):
    if text is None:
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return text                 # a name, e.g. chunk_switch


def demo_summary(monitor) -> dict:
    """What a user judges the demo by, as an outside subscriber sees it: command rate as
    received, answers and summaries received, and the inference node's final
    /diagnostics for the robot (held commands, deadline misses, latencies, predictions)."""
    times = list(monitor.command_times)
    diag = monitor.diagnostics.get(monitor.status_name, {})
    rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
    held = _diagnostic_value(diag.get("held_command_fraction"))
    return {
        "robot": monitor.robot,
        "commands_hz": rate,
        # commands that carry a step of a plan, not the held last one
        "fresh_commands_hz": None if held is None else rate * (1.0 - held),
        "commands_received": len(times),
        "action_chunks": monitor.chunks,
        "dialogue_answers": len(monitor.finished_dialogue),
        # finish_reason -> answers that ended so (eos: the model finished its answer)
        "dialogue_endings": dict(Counter(monitor.finish_reasons.values())),
        "memory_summaries": len(monitor.summaries),
    } | {key: _diagnostic_value(diag.get(key, "0" if diag and key in COUNTED else None))
         for key in SUMMARY_FROM_DIAGNOSTICS}


def _number(value, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _scored(summary: dict, key: str, rows: str) -> str:
    """e.g. "0.67 (4/6)": an accuracy and the right / scored rows it comes from."""
    right = sum(row["correct"] for row in summary[rows])
    return f"{_number(summary[key])} ({right}/{len(summary[rows])})"


def _besides_eos(endings: dict) -> str:
    """e.g. " (3 robot_refused, 1 length)": the answers the model did not end itself, by
    finish_reason (most first)."""
    others = sorted(((reason or "unknown", n) for reason, n in endings.items() if reason != "eos"),
                    key=lambda item: (-item[1], item[0]))
    return f" ({', '.join(f'{n} {reason}' for reason, n in others)})" if others else ""


def summary_line(summary: dict) -> str:
    """The robot's summary in one line; a fleet robot's frames and language tokens are the
    server's, over all its robots (the engine counts them so), and say so."""
    shared = " (the server's, all robots)" if summary.get("robot") else ""
    summaries = summary["memory_summaries"]
    return (f"summary: {summary['frames']} frames{shared}, {summary['action_chunks']} action "
            f"chunks, {summary['commands_received']} commands ({summary['commands_hz']:.1f} Hz, "
            f"held fraction {summary['held_command_fraction']}), "
            f"{summary['deadline_misses']} deadline misses, "
            + (f"{summary['missing_camera']} observations with a camera left out, "
               if summary.get("missing_camera") else "")
            + "chunk latency p50 "
            f"{summary['chunk_latency_ms_p50']} ms, {summary['language_tokens']} language "
            f"tokens{shared}, {summary['dialogue_answers']}/{summary['dialogue_requests']} "
            f"dialogue answers{_besides_eos(summary['dialogue_endings'])}, "
            f"{summaries} memory {'summary' if summaries == 1 else 'summaries'}, "
            f"{summary['torch_threads']} torch threads"
            + (f"; answer accuracy {_scored(summary, 'answer_accuracy', 'answers')}, "
               f"memory accuracy {_scored(summary, 'memory_accuracy', 'memory')}, "
               f"action error {_number(summary['action_error'], 3)}"
               if "answer_accuracy" in summary else ""))


def missing_outputs(summaries: dict, commands: bool = True) -> list[str]:
    """What a robot of the run did not get that the demo exists to show: action chunks,
    and commands unless the nodes were told not to publish them (a dry run)."""
    return [f"{name or 'the robot'} received no "
            f"{'action chunks' if not s['action_chunks'] else 'commands'}"
            for name, s in summaries.items()
            if not s["action_chunks"] or (commands and not s["commands_received"])]


def refusals(rows) -> tuple[int, int, int]:
    """(robots refused at start-up and never served, robots shed at run time, those of them
    served again) over robot summaries."""
    rows = list(rows)
    return (sum(bool(r.get("refused")) and not r.get("times_shed") for r in rows),
            sum(bool(r.get("times_shed")) for r in rows),
            sum(bool(r.get("times_shed")) and not r.get("refused") for r in rows))


def _left_out(summaries: dict) -> str:
    """e.g. "3 refused at start-up; 1 shed at run time; robot_3's camera killed", or
    "none refused"."""
    at_start, shed, back = refusals(summaries.values())
    parts = [f"{at_start} refused at start-up"] if at_start else []
    if shed:
        parts.append(f"{shed} shed at run time" + (f", {back} of them served again" if back
                                                   else ""))
    parts += [f"{name}'s camera killed" for name, r in summaries.items() if r.get("camera_killed")]
    return "; ".join(parts) or "none refused"


def fleet_line(summaries: dict) -> str:
    """The fleet in one line: over the robots served (not refused, cameras alive), the
    slowest one's command rate and fresh-command rate, the worst held fraction, the misses;
    answers and memory right over all robots; who admission refused at start-up and was
    never served, who it shed at run time (and how many of those it served again)."""
    rows = list(summaries.values())
    served = [r for r in rows if not r.get("refused") and not r.get("camera_killed")] or rows
    fresh = [r["fresh_commands_hz"] for r in served if r.get("fresh_commands_hz") is not None]
    line = (f"fleet: {len(rows)} robots ({_left_out(summaries)}), commands "
            f"{min(r['commands_hz'] for r in served):.1f} Hz or more"
            + (f" ({min(fresh):.1f} Hz fresh)" if fresh else "") + ", held fraction at most "
            f"{max(r['held_command_fraction'] or 0 for r in served)}, "
            f"{sum(r['deadline_misses'] or 0 for r in served)} deadline misses, "
            f"{sum(r['dialogue_answers'] for r in rows)}/"
            f"{sum(r['dialogue_requests'] or 0 for r in rows)} dialogue answers"
            + _besides_eos(sum((Counter(r["dialogue_endings"]) for r in rows), Counter())))
    if all("answers" in r for r in rows):
        right = sum(row["correct"] for r in rows for row in r["answers"])
        memory = sum(row["correct"] for r in rows for row in r["memory"])
        line += (f"; answers right {right}/{sum(len(r['answers']) for r in rows)}, memory "
                 f"right {memory}/{sum(len(r['memory']) for r in rows)}")
    return line
