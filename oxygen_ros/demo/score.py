"""Scores what the demo's outputs say against the tabletop world's ground truth: answers,
memory summaries and executed commands."""

from typing import Optional, Sequence

import numpy as np

from oxygen_ros.demo.questions import demo_dialogue, memory_line, questions
from oxygen_ros.demo.world import TabletopWorld

JOINT_RANGE = 2.0     # the world's joints live in [-1, 1]


def same(text: str, truth: str) -> bool:
    return text.strip().rstrip(".").lower() == truth.lower()


def answer_scores(world: TabletopWorld, dialogue: Sequence[tuple[float, str]],
                  answers: Sequence[Optional[str]],
                  about: Optional[Sequence[Optional[float]]] = None,
                  reasons: Optional[Sequence[Optional[str]]] = None,
                  missing: Optional[Sequence[Sequence[str]]] = None) -> list[dict]:
    """One row per question asked at (seconds into the bag, question): answer and truth.
    about[i]: when the observation the i-th answer read was taken (seconds into the bag);
    the truth is the world's then (default, or None: when it was asked). reasons[i]: the
    finish_reason the i-th answer ended with (None: not received). missing[i]: the cameras
    that observation lacked (the model answered without them)."""
    rows = []
    about = about or [None] * len(dialogue)
    reasons = reasons or [None] * len(dialogue)
    missing = missing or [()] * len(dialogue)
    for (t, question), answer, seen, reason, lacked in zip(dialogue, answers, about, reasons,
                                                            missing):
        seen = t if seen is None else seen
        truth = dict(questions(world, seen)).get(question)
        rows.append({"t": t, "about_s": seen, "question": question, "answer": answer,
                     "finish_reason": reason, "missing_cameras": list(lacked), "truth": truth,
                     "correct": answer is not None and truth is not None and same(answer, truth)})
    return rows


def lacking(cameras: Sequence[str]) -> str:
    """What a printed answer adds about its observation: nothing if it had every camera,
    else the cameras it was answered without."""
    return f", without {', '.join(cameras)}" if cameras else ""


def ending(reason: Optional[str]) -> str:
    """What a printed answer adds about how it ended: nothing for an answer the model
    ended itself (eos) or one not received (None), else the reason (a cut-off answer must
    not pass for a whole one)."""
    if reason is None or reason == "eos":
        return ""
    return f", ended: {reason or 'unknown'}"


def frame_time(seconds: float, camera_hz: float) -> float:
    """A restamped observation's time (seconds into the bag, off by the replay's
    publishing jitter) snapped to the bag's camera frame it shows."""
    return round(round(seconds * camera_hz) / camera_hz, 6)


def memory_scores(world: TabletopWorld, summaries: Sequence[str], period_s: float) -> list[dict]:
    """The k-th summary covers [k * period, (k + 1) * period] of sensor time."""
    rows = []
    for k, summary in enumerate(summaries):
        truth = memory_line(world, k * period_s, (k + 1) * period_s)
        rows.append({"window_s": [k * period_s, (k + 1) * period_s], "summary": summary,
                     "truth": truth, "correct": same(summary, truth)})
    return rows


def action_error(world: TabletopWorld, commands: Sequence[tuple[float, Sequence[float]]]
                 ) -> Optional[float]:
    """Mean absolute error of executed commands (seconds into the bag, joint values)
    against the expert at that moment, as a fraction of the joint range."""
    if not commands:
        return None
    errors = []
    for t, values in commands:
        n = min(len(values), len(world.joint_names))
        errors.append(np.abs(np.asarray(values[:n]) - world.joint_positions(t)[:n]).mean())
    return float(np.mean(errors) / JOINT_RANGE)


def accuracy(rows: Sequence[dict]) -> Optional[float]:
    return sum(r["correct"] for r in rows) / len(rows) if rows else None


def score_run(seed: int, duration_s: float, camera_hz: float, memory_period_s: float,
              answers: dict, finish_reasons: dict, answer_stamps: dict,
              summaries: Sequence[str], commands: Sequence[tuple[float, Sequence[float]]],
              bag_zero_wall: Optional[float], missing_cameras: Optional[dict] = None) -> dict:
    """A demo run's outputs judged against world `seed`: answers (request id -> text, ids
    from 1 in the bag's order) and why each ended (request id -> finish_reason), the wall
    stamp of the observation each answer read (and the cameras it lacked, request id ->
    names), memory summaries, executed commands (wall time, values). An answer is judged
    against the world when its observation was taken (the replay restamps: wall time of bag
    time 0 + seconds into the bag)."""
    world = TabletopWorld(seed)
    dialogue = [(t, question) for t, question in demo_dialogue(world) if t < duration_s]
    ids = range(1, len(dialogue) + 1)
    about = [frame_time(answer_stamps[i] - bag_zero_wall, camera_hz)
             if bag_zero_wall is not None and i in answer_stamps else None for i in ids]
    rows = answer_scores(world, dialogue, [answers.get(i) for i in ids], about,
                         [finish_reasons.get(i) for i in ids],
                         [(missing_cameras or {}).get(i, ()) for i in ids])
    memory = memory_scores(world, summaries, memory_period_s)
    executed = ([(wall - bag_zero_wall, values) for wall, values in commands]
                if bag_zero_wall is not None else [])
    return {"answer_accuracy": accuracy(rows), "memory_accuracy": accuracy(memory),
            "action_error": action_error(world, executed), "answers": rows, "memory": memory,
            "world_seed": seed, "task": world.instruction}


def answer_lines(rows: Sequence[dict]) -> list[str]:
    """Each question with its answer and the world's truth, as the demo prints them."""
    return [f"  at {row['t']:4.1f} s  asked: {row['question']!r}\n"
            f"           answer: {row['answer']!r}  (about the frame at {row['about_s']:.2f} s"
            f"{lacking(row.get('missing_cameras', ()))}{ending(row.get('finish_reason'))})"
            f"\n            truth: {row['truth']!r}  ({'right' if row['correct'] else 'wrong'})"
            for row in rows]
