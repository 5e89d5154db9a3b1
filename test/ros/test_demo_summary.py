"""The demo's summary says how each answer ended: an answer cut short (a timeout, the
robot's refusal) is printed and counted as such, not passed off as a whole one."""

from oxygen_ros.demo import score
from oxygen_ros.demo.world import TabletopWorld
from oxygen_ros.demo.questions import demo_dialogue
from oxygen_ros.ros.demo_summary import fleet_line, summary_line


def summary(**changes) -> dict:
    return {"frames": 60, "action_chunks": 12, "commands_received": 600, "commands_hz": 50.0,
            "fresh_commands_hz": 50.0, "held_command_fraction": 0.0, "deadline_misses": 0,
            "chunk_latency_ms_p50": 60.0, "language_tokens": 300, "dialogue_answers": 4,
            "dialogue_requests": 4, "dialogue_endings": {"eos": 4}, "memory_summaries": 2,
            "torch_threads": 1} | changes


def test_answers_cut_short_are_counted_by_reason_in_the_summary_and_fleet_lines():
    assert "4/4 dialogue answers, 2 memory" in summary_line(summary())
    cut = summary(dialogue_endings={"eos": 1, "robot_refused": 2, "timeout": 1})
    assert "4/4 dialogue answers (2 robot_refused, 1 timeout), 2 memory" in summary_line(cut)
    line = fleet_line({"robot_0": summary(dialogue_endings={"eos": 3, "length": 1}),
                       "robot_1": cut})
    assert line.endswith("8/8 dialogue answers (2 robot_refused, 1 timeout, 1 length)"), line


def test_a_printed_answer_names_the_reason_it_ended_unless_the_model_finished_it():
    world = TabletopWorld(7)
    dialogue = demo_dialogue(world)[:2]
    rows = score.answer_scores(world, dialogue, ["a red b", None], reasons=["robot_refused", None])
    assert [row["finish_reason"] for row in rows] == ["robot_refused", None]
    first, second = score.answer_lines(rows)
    assert "(about the frame at 1.50 s, ended: robot_refused)" in first, first
    assert "ended" not in second and "answer: None" in second, second
    whole = score.answer_scores(world, dialogue[:1], [rows[0]["truth"]], reasons=["eos"])
    assert whole[0]["correct"] and "ended" not in score.answer_lines(whole)[0]
