"""The tabletop world is a pure function of (seed, t); its expert does the task; the
questions' answers and memory lines follow what the world shows; scores judge by them."""

import numpy as np
import pytest

from oxygen_ros.demo import score
from oxygen_ros.demo.questions import demo_dialogue, memory_line, questions
from oxygen_ros.demo.world import BASE_VIEW, CAMERAS, COLORS, PHASES, THING_RADIUS, TabletopWorld


def test_frames_and_joint_states_are_a_pure_function_of_seed_and_time():
    a, b, other = TabletopWorld(3), TabletopWorld(3), TabletopWorld(4)
    for t in (0.0, 2.5, 5.0, 9.0):
        for camera in range(len(CAMERAS)):
            assert np.array_equal(a.frame(camera, t), b.frame(camera, t))
        assert np.array_equal(a.joint_positions(t), b.joint_positions(t))
    assert not np.array_equal(a.frame(0, 0.0), other.frame(0, 0.0))
    assert a.frame(0, 1.0, 240, 320).shape == (240, 320, 3)


@pytest.mark.parametrize("seed", range(6))
def test_the_expert_picks_the_target_and_puts_it_in_the_bin(seed):
    world = TabletopWorld(seed)
    target = world.things[world.target]
    x, y, z, gripper = world.end_effector(PHASES[0][1])          # end of reaching
    assert (abs(x - target.x), abs(y - target.y), gripper) < (1e-6, 1e-6, 1.01)
    assert world.where(world.target, 5.0)[3] == "gripper"
    assert world.where(world.target, 8.0)[3] == "bin"
    assert all(world.where(i, 8.0)[3] == "table" for i in range(len(world.things))
               if i != world.target)
    steps = np.diff(world.actions(0.0, 500, 0.02), axis=0)        # 10 s at 50 Hz
    assert np.abs(steps).max() < 0.1                               # smooth: no jumps
    assert target.name in world.instruction and 2 <= len(world.things) <= 4


def test_a_held_thing_hides_what_it_passes_over():
    """World 0 carries its yellow cup over the red ball at 5.07 s: the base camera shows
    the cup's ring on top of the ball (test_train checks the patch targets agree)."""
    world, t, size = TabletopWorld(0), 5.07, 112
    cup, ball = world.target, 2
    assert (world.things[cup].name, world.things[ball].name) == ("yellow cup", "red ball")
    assert world.drawing_order(t)[-1] == cup and world.drawing_order(1.0) == [0, 1, 2]
    image = world.frame(0, t, size, size).astype(float)
    scale = size / BASE_VIEW
    rows, cols = np.mgrid[:size, :size]

    def distance(index):
        x, y, z, _ = world.where(index, t)
        return np.hypot(cols - (size / 2 + x * scale), rows - (size / 2 + y * scale)), z

    to_cup, z = distance(cup)
    to_ball, _ = distance(ball)
    ring = int(THING_RADIUS * scale * (1 + z))
    crossing = (np.abs(to_cup - ring) < 0.5) & (to_ball < THING_RADIUS * scale - 1.5)
    assert crossing.sum() >= 3
    yellow = np.abs(image - COLORS["yellow"]).sum(-1) < 60
    assert yellow[crossing].all()


def test_answers_follow_the_world_over_time():
    world = TabletopWorld(0)
    target = world.things[world.target].name
    early, carrying, late = (dict(questions(world, t)) for t in (1.0, 5.0, 9.5))
    assert early[f"where is the {target}?"] in ("on the left", "on the right", "at the front",
                                                 "at the back")
    assert carrying[f"where is the {target}?"] == "in the gripper"
    assert late[f"where is the {target}?"] == "in the bin"
    assert (early["are you done?"], late["are you done?"]) == ("no", "yes")
    assert carrying["what are you doing?"] == f"carrying the {target} to the bin"
    # "picking up": the gripper closes (3.0-3.6 s; the target moves with it from 3.6 s)
    # and lifts (to 4.3 s)
    assert [dict(questions(world, t))["what are you doing?"] for t in (2.99, 3.0, 4.29, 4.3)
            ] == [f"reaching for the {target}", f"picking up the {target}",
                  f"picking up the {target}", f"carrying the {target} to the bin"]
    assert [world.where(world.target, t)[3] for t in (3.59, 3.6)] == ["table", "gripper"]
    assert early["how many objects are there?"] == {2: "two", 3: "three", 4: "four"}[
        len(world.things)]
    assert memory_line(world, 0, 4) == f"reached the {target}, then picked up the {target}"
    assert memory_line(world, 4, 8) == f"put the {target} in the bin"
    assert memory_line(world, 8, 12) == "nothing, the task is done"


def test_scores_judge_answers_memory_and_commands_by_the_ground_truth():
    world = TabletopWorld(0)
    dialogue = [(2.0, "are you done?"), (9.0, "are you done?")]
    rows = score.answer_scores(world, dialogue, ["no", "No."])
    assert [r["correct"] for r in rows] == [True, False] and score.accuracy(rows) == 0.5
    # judged when the observation the answer read was taken: asked at 2.95 s while
    # reaching (which ends at 3.0 s), answered about the camera frame at 3.0 s
    target = world.things[world.target].name
    about = score.frame_time(3.0004, 15.0)   # restamped: publishing jitter
    assert about == 3.0
    rows = score.answer_scores(world, [(2.95, "what are you doing?")] * 2,
                               [f"picking up the {target}"] * 2, [about, None])
    assert [(r["about_s"], r["correct"]) for r in rows] == [(3.0, True), (2.95, False)]
    memory = score.memory_scores(world, [memory_line(world, 0, 4), "something else"], 4.0)
    assert [r["correct"] for r in memory] == [True, False]
    expert = [(t, world.joint_positions(t).tolist()) for t in np.arange(0, 10, 0.02)]
    assert score.action_error(world, expert) == 0.0
    shifted = [(t, (np.array(v) + 0.2).tolist()) for t, v in expert]
    assert score.action_error(world, shifted) == pytest.approx(0.1)
    assert score.action_error(world, []) is None


def test_a_printed_answer_names_the_reason_it_ended_unless_the_model_ended_it():
    world = TabletopWorld(7)
    dialogue = demo_dialogue(world)[:2]
    rows = score.answer_scores(world, dialogue, ["a red b", None], reasons=["robot_refused", None])
    assert [row["finish_reason"] for row in rows] == ["robot_refused", None]
    first, second = score.answer_lines(rows)
    assert "(about the frame at 1.50 s, ended: robot_refused)" in first, first
    assert "ended" not in second and "answer: None" in second, second
    whole = score.answer_scores(world, dialogue[:1], [rows[0]["truth"]], reasons=["eos"])
    assert whole[0]["correct"] and "ended" not in score.answer_lines(whole)[0]
    assert score.ending("length") == ", ended: length" and score.ending("") == ", ended: unknown"


def test_a_printed_answer_names_the_cameras_its_observation_lacked():
    world = TabletopWorld(1)
    dialogue = demo_dialogue(world)[:1] * 2
    wrong = "a red block, a blue box, a green box and a yellow block"   # the starved answer
    rows = score.answer_scores(world, dialogue, [wrong] * 2, reasons=["eos", "eos"],
                               missing=[["right_wrist"], []])
    assert [row["missing_cameras"] for row in rows] == [["right_wrist"], []]
    assert not any(row["correct"] for row in rows)
    lacking, whole = score.answer_lines(rows)
    assert "(about the frame at 1.50 s, without right_wrist)" in lacking, lacking
    assert "(about the frame at 1.50 s)" in whole, whole
    assert score.answer_scores(world, dialogue[:1], [wrong])[0]["missing_cameras"] == []
