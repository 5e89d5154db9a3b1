"""`oxygen-ros demo --robots 2`: two tabletop worlds, each robot's camera_ingest under its
namespace, one inference process for both (the demo model). Each robot is served, every
request of each is answered, and the first answer — what is on the table, asked at 1.5 s
before the arm has moved anything — is right for that robot's own world: the two worlds
hold different objects, so an answer about the other robot's frames would be wrong. (How
many objects there are changes once the target is in the bin: an answer about a frame a
moment later can be right about that frame and scored wrong.) On a starved machine
camera_ingest may leave a late wrist camera out, and the demo model answers such a frame
wrongly (world 1 at 1.6 s: a green box too many), so a wrong first answer is accepted only
about an observation that lacked a camera (the answer says which), and never the other
world's truth.
Admission is off: on a slow or loaded machine it would refuse the second robot
(test/engine/test_fleet.py tests it)."""

import json

FIRST_QUESTION = "what do you see?"


def test_demo_with_two_robots_answers_each_about_its_own_world(tmp_path, processes):
    summary = tmp_path / "summary.json"
    demo = processes.python("-m", "oxygen_ros.cli", "demo", "--robots", "2", "--duration", "7",
                            "--bag", tmp_path / "bag", "--summary", summary,
                            "-p", "inference:admission:=false")
    printed = processes.finish(demo, timeout=600)
    assert demo.returncode == 0, printed[-3000:]
    robots = json.loads(summary.read_text())["robots"]
    assert sorted(robots) == ["robot_0", "robot_1"]
    truths, answers = {}, {}
    for name, robot in robots.items():
        assert robot["refused"] == "" and robot["action_chunks"] > 0, robot
        assert robot["commands_received"] > 0
        assert robot["dialogue_answers"] == robot["dialogue_requests"] == 4, robot
        assert set(robot["dialogue_endings"]) <= {"eos", "length"}, robot   # none cut short
        first = robot["answers"][0]
        assert first["question"] == FIRST_QUESTION, first
        assert first["correct"] or first["missing_cameras"], first
        truths[name], answers[name] = first["truth"], first["answer"]
    assert truths["robot_0"] != truths["robot_1"]     # two worlds: cross-talk would show
    assert answers["robot_0"] != truths["robot_1"] and answers["robot_1"] != truths["robot_0"]
    assert "fleet: 2 robots (none refused)" in printed
