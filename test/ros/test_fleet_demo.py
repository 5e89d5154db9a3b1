"""`oxygen-ros demo --robots 2`: two tabletop worlds, each robot's camera_ingest under its
namespace, one inference process for both (the demo model). Each robot is served, every
request of each is answered, and the answers whose truth does not depend on the moment
(what is on the table, how many objects) are right for that robot's own world — the two
worlds differ, so an answer about the other robot's frames would be wrong."""

import json

STATIC_QUESTIONS = ("what do you see?", "how many objects are there?")


def test_demo_with_two_robots_answers_each_about_its_own_world(tmp_path, processes):
    summary = tmp_path / "summary.json"
    demo = processes.python("-m", "oxygen_ros.cli", "demo", "--robots", "2", "--duration", "7",
                            "--bag", tmp_path / "bag", "--summary", summary)
    printed = processes.finish(demo, timeout=600)
    assert demo.returncode == 0, printed[-3000:]
    robots = json.loads(summary.read_text())["robots"]
    assert sorted(robots) == ["robot_0", "robot_1"]
    truths = {}
    for name, robot in robots.items():
        assert robot["refused"] == "" and robot["action_chunks"] > 0, robot
        assert robot["commands_received"] > 0
        assert robot["dialogue_answers"] == robot["dialogue_requests"] == 4, robot
        static = [row for row in robot["answers"] if row["question"] in STATIC_QUESTIONS]
        assert len(static) == 2 and all(row["correct"] for row in static), static
        truths[name] = [row["truth"] for row in static]
    assert truths["robot_0"] != truths["robot_1"]     # two worlds: cross-talk would show
    assert "fleet: 2 robots (0 refused)" in printed
