"""The demo's summary says how each answer ended: answers cut short (a timeout, the robot's
refusal) are counted by reason, not passed off as whole ones; it counts requests from a
status that has seen none yet as 0; the demo fails naming what a robot did not get."""

from collections import deque
from types import SimpleNamespace

from oxygen_ros.ros.demo_summary import demo_summary, fleet_line, missing_outputs, summary_line


def watched(finish_reasons: dict) -> SimpleNamespace:
    """What an OutputMonitor holds after a run (its fields, no subscriptions)."""
    return SimpleNamespace(
        robot="", command_times=deque([0.0, 0.02, 0.04]), chunks=3, summaries=["a", "b"],
        finished_dialogue=[(i, "text") for i in finish_reasons], finish_reasons=finish_reasons,
        status_name="oxygen_ros: inference", diagnostics={"oxygen_ros: inference": {
            "frames": "60", "held_command_fraction": "0.0", "deadline_misses": "0",
            "chunk_latency_ms_p50": "60.0", "language_tokens": "300", "torch_threads": "1",
            "dialogue_requests": str(len(finish_reasons))}})


def test_answers_cut_short_are_counted_by_reason_in_the_summary_and_fleet_lines():
    whole = demo_summary(watched({1: "eos", 2: "eos", 3: "length"}))
    assert whole["dialogue_endings"] == {"eos": 2, "length": 1}
    assert "3/3 dialogue answers (1 length), 2 memory" in summary_line(whole)
    cut = demo_summary(watched({1: "eos", 2: "robot_refused", 3: "timeout", 4: "robot_refused"}))
    assert cut["dialogue_answers"] == 4 and cut["dialogue_endings"]["robot_refused"] == 2
    assert "4/4 dialogue answers (2 robot_refused, 1 timeout), 2 memory" in summary_line(cut)
    assert "dialogue answers, 2 memory" in summary_line(demo_summary(watched({1: "eos"})))
    line = fleet_line({"robot_0": whole, "robot_1": cut})
    assert line.endswith("7/7 dialogue answers (2 robot_refused, 1 length, 1 timeout)"), line


def test_the_fleet_line_tells_refused_at_start_up_from_shed_at_run_time():
    served = demo_summary(watched({1: "eos"}))
    assert "fleet: 2 robots (none refused), commands" in fleet_line({"a": served, "b": served})
    at_start = served | {"refused": "refused: 4 robots would miss their targets"}
    shed = served | {"refused": "shed at run time: with 3 robots running", "times_shed": 1}
    back = served | {"times_shed": 2}               # shed, then served again
    killed = served | {"camera_killed": True}
    line = fleet_line({"r0": served, "r1": at_start, "r2": shed, "r3": back, "r4": killed})
    assert line.startswith("fleet: 5 robots (1 refused at start-up; 2 shed at run time, 1 of "
                           "them served again; r4's camera killed), commands"), line


def test_a_status_before_any_request_counts_none_not_unknown():
    quiet = watched({})
    del quiet.diagnostics["oxygen_ros: inference"]["dialogue_requests"]
    summary = demo_summary(quiet)
    assert summary["dialogue_requests"] == summary["timed_out_requests"] == 0
    assert "0/0 dialogue answers" in summary_line(summary)
    unheard = watched({})
    unheard.diagnostics = {}                 # no status at all: unknown, not 0
    assert demo_summary(unheard)["dialogue_requests"] is None


def test_the_demo_fails_naming_what_a_robot_did_not_get_but_a_dry_run_needs_no_commands():
    served = demo_summary(watched({1: "eos"}))
    silent = served | {"commands_received": 0}
    assert missing_outputs({"": served}) == []
    assert missing_outputs({"": silent}) == ["the robot received no commands"]
    assert missing_outputs({"": silent}, commands=False) == []
    assert missing_outputs({"a": served, "b": silent | {"action_chunks": 0}}, False) == \
        ["b received no action chunks"]


def test_observations_with_a_camera_left_out_are_counted_and_named():
    whole = demo_summary(watched({1: "eos"}))
    assert whole["missing_camera"] == 0 and "left out" not in summary_line(whole)
    starved = watched({1: "eos"})      # camera_ingest left a late camera out of 3 sets
    starved.diagnostics["oxygen_ros: inference"]["missing_camera"] = "3"
    summary = demo_summary(starved)
    assert summary["missing_camera"] == 3
    assert ("0 deadline misses, 3 observations with a camera left out, chunk latency p50"
            in summary_line(summary)), summary_line(summary)


def test_a_fleet_robots_line_says_which_numbers_are_the_servers():
    alone = summary_line(demo_summary(watched({1: "eos"})))
    assert alone.startswith("summary: 60 frames, 3 action chunks") and "300 language tokens, " \
        in alone
    fleet = watched({1: "eos"})
    fleet.robot, fleet.summaries = "robot_1", ["a"]
    line = summary_line(demo_summary(fleet))
    assert line.startswith("summary: 60 frames (the server's, all robots), 3 action chunks"), line
    assert "300 language tokens (the server's, all robots), 1/1 dialogue answers, 1 memory " \
        "summary, " in line, line
