"""The shipped demo model (models/demo) through the serving engines, on worlds it never
saw (training worlds are seeds 10 000 and up): answers and memory summaries are right,
the executed actions follow the expert; the baselines say exactly the same; and a
question is answered about the frame it was asked on, however requests interleave."""

import json
from pathlib import Path

import numpy as np
import pytest

from oxygen_ros.demo.episode import demo_engine_config, run_episode
from oxygen_ros.demo.evaluate import evaluate, prefilled, reply
from oxygen_ros.demo.observe import world_prefix
from oxygen_ros.demo.questions import demo_dialogue, questions
from oxygen_ros.demo.world import TabletopWorld
from oxygen_ros.engine.baselines import IsolatedEngine, SharedKVEngine
from oxygen_ros.engine.oxygen import OxygenEngine
from oxygen_ros.model.loading import load_model
from oxygen_ros.model.tokenizer import ByteTokenizer

PERIOD = 0.2
WORLDS = (0, 1, 2, 3)
EVERY_QUESTION_AT = (2.6, 7.4)      # besides the demo's questions: all of them, twice


@pytest.fixture(scope="module")
def demo():
    loaded = load_model(checkpoint="package://oxygen_ros/models/demo")
    return loaded.model.eval(), loaded.normalization


def asks(world: TabletopWorld) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for t, question in demo_dialogue(world):
        out.setdefault(round(t / PERIOD), []).append(question)
    for t in EVERY_QUESTION_AT:
        out.setdefault(round(t / PERIOD), []).extend(q for q, _ in questions(world, t))
    return out


@pytest.fixture(scope="module")
def oxygen_episodes(demo):
    model, normalization = demo
    return {seed: run_episode(OxygenEngine, model, normalization, TabletopWorld(seed),
                              asks(TabletopWorld(seed)), frames=60, period_s=PERIOD)
            for seed in WORLDS}


# Issue 13's targets. The shipped model reaches 92 of 92 answers, 8 of 8 summaries and
# action errors of 0.036-0.052 through the engine on these worlds (`pytest -s` prints
# them); the random `small` preset scores 0 here.
ANSWERS, MEMORY, ACTION_ERROR = 0.9, 0.8, 0.1


def test_the_engine_answers_remembers_and_acts_on_unseen_worlds(oxygen_episodes):
    answers = [row for e in oxygen_episodes.values() for row in e.answers]
    memory = [row for e in oxygen_episodes.values() for row in e.memory]
    assert len(answers) >= 4 * 20 and len(memory) == 4 * 2
    print(f"answers {sum(r['correct'] for r in answers)}/{len(answers)}, summaries "
          f"{sum(r['correct'] for r in memory)}/{len(memory)}, action error "
          + ", ".join(f"{e.action_error:.3f}" for e in oxygen_episodes.values()))
    assert all(row["answer"] for row in answers)             # every question answered
    assert sum(row["correct"] for row in answers) / len(answers) >= ANSWERS, answers
    assert sum(row["correct"] for row in memory) / len(memory) >= MEMORY, memory
    assert max(e.action_error for e in oxygen_episodes.values()) <= ACTION_ERROR
    # questions the prompt and state decide are right everywhere
    done = [row for row in answers if row["question"] == "are you done?"]
    assert len(done) >= 8 and all(row["correct"] for row in done), done
    # the questions ran side by side: later ones arrived while earlier ones decoded
    assert all(e.overlapped > 0 for e in oxygen_episodes.values())


@pytest.mark.parametrize("engine_class", [IsolatedEngine, SharedKVEngine])
def test_the_baselines_give_the_same_answers_and_summaries(demo, oxygen_episodes,
                                                           engine_class):
    model, normalization = demo
    seed = WORLDS[0]
    episode = run_episode(engine_class, model, normalization, TabletopWorld(seed),
                          asks(TabletopWorld(seed)), frames=60, period_s=PERIOD)
    reference = oxygen_episodes[seed]
    assert [r["answer"] for r in episode.answers] == [r["answer"] for r in reference.answers]
    assert [r["summary"] for r in episode.memory] == [r["summary"] for r in reference.memory]


def test_the_shipped_manifest_states_the_shipped_weights_metrics(demo):
    """models/demo/manifest.json's metrics are what these weights score now (a stale
    manifest, or weights replaced without retraining, fail here)."""
    model, normalization = demo
    manifest = json.loads((Path(__file__).resolve().parents[2] / "models" / "demo"
                           / "manifest.json").read_text())["metrics"]
    measured = evaluate(model, normalization, worlds=manifest["worlds"])
    assert measured["questions"] == manifest["questions"]
    for key in ("answer_accuracy", "memory_accuracy", "action_error"):
        assert abs(measured[key] - manifest[key]) < 1e-6, (key, measured, manifest)
    assert measured["answer_accuracy_by_question"] == pytest.approx(
        manifest["answer_accuracy_by_question"], abs=1e-9)


def alone(model, normalization, world: TabletopWorld, t: float, question: str) -> str:
    """The answer decoded over frame t's prefix and nothing else."""
    prefix = world_prefix(world, t, model.config, ByteTokenizer(), normalization)
    return reply(model, *prefilled(model, prefix), question)


@pytest.mark.parametrize("draw", range(4))
def test_a_question_is_answered_about_the_frame_it_was_asked_on(demo, draw):
    """The target moves with the gripper from 3.6 s (lifted by 4.3 s) and is dropped in
    the bin at 7.1 s. Questions about it arrive at random frames around those moments,
    several at once or one by one, with 2 tokens per frame, so each decodes over many
    frames while newer frames arrive and newer questions attach to them."""
    model, normalization = demo
    rng = np.random.default_rng(draw)
    world = TabletopWorld(int(rng.integers(0, 1000)))
    target = world.things[world.target].name
    pool = [f"where is the {target}?", "what are you doing?", "are you done?"]
    frames = sorted(rng.choice(np.arange(10, 45), size=8, replace=False))
    schedule = {int(i): list(rng.choice(pool, size=int(rng.integers(1, 3)), replace=False))
                for i in frames}
    for before, after in ((10, 17), (19, 34)):   # the target on the table, then lifted
        i = int(rng.integers(before, after + 1))
        if pool[0] not in schedule.setdefault(i, []):
            schedule[i].append(pool[0])
    config = demo_engine_config(tokens_per_frame=2, max_tokens_per_frame=2, memory_period_s=0)
    episode = run_episode(OxygenEngine, model, normalization, world, schedule, frames=50,
                          period_s=PERIOD, config=config)
    assert episode.overlapped >= 4
    about_target = [row for row in episode.answers if row["question"] == pool[0]]
    assert len({row["truth"] for row in about_target}) >= 2   # the world changed under them
    assert len({row["answer"] for row in about_target}) >= 2  # and the model says so: an
    # answer decoded over another frame than its own would differ from `alone` below
    for row in episode.answers:                # about its own frame, not a neighbour's
        assert row["answer"] == alone(model, normalization, world, row["t"], row["question"])


def test_the_episode_engine_is_set_up_as_the_demo_yaml_sets_the_node_up():
    """demo_engine_config copies config/humanoid_demo.yaml's language settings; the
    in-process episodes judge the model under what `make run` runs."""
    from oxygen_ros.ros import config_check, rcl_yaml

    path = Path(__file__).resolve().parents[2] / "config" / "humanoid_demo.yaml"
    params = config_check.planned_values(path, rcl_yaml.load(path.read_text()), "inference",
                                         "/inference")   # the YAML over the code's defaults
    config = demo_engine_config()
    for name in ("tokens_per_frame", "max_tokens_per_frame", "dialogue_max_tokens",
                 "memory_max_tokens", "chunk_switch"):
        assert getattr(config, name) == params[name], name
    assert tuple(params["camera_names"]) == config.camera_names


def test_bfloat16_follows_float32_on_unseen_worlds(demo):
    """issue 28's bounds: actions within 0.02 (normalized units), answers the same on at
    least 95 % of the questions (here two worlds; evaluate-demo --bfloat16-agreement runs
    all 24)."""
    from oxygen_ros.demo.evaluate import dtype_agreement

    model, normalization = demo
    other = load_model(checkpoint="package://oxygen_ros/models/demo", dtype="bfloat16").model
    agreement = dtype_agreement(model, other, normalization, worlds=2, times=(1.0, 5.0))
    assert agreement["action_max_difference"] <= 0.02
    assert agreement["answers_same"] >= 0.95


def test_a_frame_without_a_wrist_camera_is_answered_as_the_docs_say(demo):
    """docs/demo-model.md's starved answer: world 1 at 1.6 s, asked what it sees, is right
    with every camera and names a green box too many without one wrist camera (what
    test_fleet_demo's starved run once got)."""
    model, normalization = demo
    world, tokenizer = TabletopWorld(1), ByteTokenizer()
    truth = dict(questions(world, 1.6))["what do you see?"]
    assert truth == "a red block, a blue box and a yellow block"
    for cameras, expected in [(("base", "left_wrist", "right_wrist"), truth),
                              (("base", "left_wrist"), "a red block, a blue box, a green box "
                                                      "and a yellow block")]:
        prefix = world_prefix(world, 1.6, model.config, tokenizer, normalization, cameras)
        assert reply(model, *prefilled(model, prefix), "what do you see?") == expected, cameras
