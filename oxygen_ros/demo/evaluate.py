"""Judges a demo model on unseen tabletop worlds through the inference path (paged prefix,
prompt extension, greedy decoding, the flow sampler): answer accuracy, memory accuracy
and action error, as the running system would produce them; and the demo's own questions
on the camera frames `make run` answers them over."""

import math
from collections import Counter
from typing import Optional

import numpy as np
import torch

from oxygen_ros import progress
from oxygen_ros.cache.kv_cache import KVCache
from oxygen_ros.demo.questions import DEMO_QUESTIONS, demo_dialogue, memory_line, questions
from oxygen_ros.demo.sampling import ACTION_DT, MEMORY_PERIOD_S, TEMPLATES, Sampler
from oxygen_ros.demo.score import JOINT_RANGE
from oxygen_ros.demo.world import TabletopWorld
from oxygen_ros.model.normalization import Normalization
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.tokenizer import ByteTokenizer

def greedy(model: Pi05Model, cache: KVCache, base, prompt: list[int], limit: int = 64) -> str:
    tokenizer = ByteTokenizer()
    table = cache.fork(base, "dialogue")
    assert cache.reserve(table, len(prompt) + limit)
    token = int(model.extend(table, prompt, cache).argmax())
    out = []
    while token != tokenizer.eos_id and len(out) < limit:
        out.append(token)
        token = int(model.decode([table], [token], cache)[0].argmax())
    cache.free(table)
    return tokenizer.decode(out)


def prefilled(model: Pi05Model, prefix) -> tuple[KVCache, object]:
    """A fresh cache holding one frame's prefix, and that prefix's page table."""
    cache = KVCache.for_model(model.config, num_pages=64, page_size=16, dtype=model.dtype)
    return cache, model.prefill(prefix, cache)


def reply(model: Pi05Model, cache: KVCache, base, question: str) -> str:
    """The greedy answer to a question asked in the engine's dialogue template over base."""
    prompt = ByteTokenizer().encode(TEMPLATES.dialogue_template.format(text=question),
                                    bos=False)
    return greedy(model, cache, base, prompt)


@torch.inference_mode()
def evaluate(model: Pi05Model, normalization: Normalization, worlds: int = 24,
             first_world: int = 0, times=(1.0, 3.3, 5.0, 7.0, 9.5),
             show_progress: bool = False) -> dict:
    """Every question at each of `times` and both memory windows, in worlds first_world..
    (never trained on: training uses TRAIN_SEEDS and up)."""

    sampler = Sampler(model, normalization, seed=0)
    tokenizer = ByteTokenizer()
    right, asked = Counter(), Counter()
    memory_right = memory_asked = 0
    errors = []
    generator = torch.Generator().manual_seed(0)
    done = progress.bar(worlds, "unseen worlds", "world", disable=not show_progress)
    for seed in range(first_world, first_world + worlds):
        world = TabletopWorld(seed)
        for t in times:
            cache, base = prefilled(model, sampler.observation(world, t))
            for question, truth in questions(world, t):
                right[kind(question)] += reply(model, cache, base, question) == truth
                asked[kind(question)] += 1
            noise = torch.randn(1, model.config.action_horizon, model.config.action_dim,
                                generator=generator)
            actions = normalization.unnormalize_actions(
                model.sample_actions([base], noise, cache)[0].float().numpy())
            expert = world.actions(t, model.config.action_horizon, ACTION_DT)
            errors.append(np.abs(actions[:, :expert.shape[1]] - expert).mean() / JOINT_RANGE)
        for window in (1, 2):
            t = window * MEMORY_PERIOD_S + 0.1
            cache, base = prefilled(model, sampler.observation(world, t))
            previous = memory_line(world, (window - 1) * MEMORY_PERIOD_S - MEMORY_PERIOD_S,
                                   (window - 1) * MEMORY_PERIOD_S) if window > 1 else ""
            # numbered as the engine numbers frames at the demo's 5 Hz
            first, last = round(5 * (t - MEMORY_PERIOD_S)) + window - 1, round(5 * t)
            text = TEMPLATES.memory_template.format(previous=previous, first=first, last=last)
            truth = memory_line(world, t - MEMORY_PERIOD_S, t)
            memory_right += greedy(model, cache, base, tokenizer.encode(text, bos=False)) == truth
            memory_asked += 1
        done.update()
    done.close()
    return {"answer_accuracy": sum(right.values()) / sum(asked.values()),
            "memory_accuracy": memory_right / memory_asked,
            "action_error": float(np.mean(errors)), "worlds": worlds,
            "questions": sum(asked.values()), "memory_requests": memory_asked,
            "answer_accuracy_by_question": {k: right[k] / asked[k] for k in asked}}


@torch.inference_mode()
def dtype_agreement(model: Pi05Model, other: Pi05Model, normalization: Normalization,
                    worlds: int = 24, first_world: int = 0, times=(1.0, 3.3, 5.0, 7.0, 9.5),
                    show_progress: bool = False) -> dict:
    """How far `other` (the same weights in another dtype) is from `model` on evaluate()'s
    worlds, moments and questions: the largest action difference (normalized units, the
    same noise) and the share of answers that are the same text."""
    sampler = Sampler(model, normalization, seed=0)
    generator = torch.Generator().manual_seed(0)
    differences, same, asked = [], 0, 0
    done = progress.bar(worlds, "unseen worlds", "world", disable=not show_progress)
    for seed in range(first_world, first_world + worlds):
        world = TabletopWorld(seed)
        for t in times:
            observation = sampler.observation(world, t)
            runs = [(m, *prefilled(m, observation)) for m in (model, other)]
            for question, _ in questions(world, t):
                answers = {reply(m, cache, base, question) for m, cache, base in runs}
                same += len(answers) == 1
                asked += 1
            noise = torch.randn(1, model.config.action_horizon, model.config.action_dim,
                                generator=generator)
            first, second = (m.sample_actions([base], noise, cache)[0].float()
                             for m, cache, base in runs)
            differences.append(float((first - second).abs().max()))
        done.update()
    done.close()
    return {"action_max_difference": max(differences),
            "action_mean_max_difference": float(np.mean(differences)),
            "answers_same": same / asked, "questions": asked, "worlds": worlds}


def kind(question: str) -> str:
    """The question without its object: "where is", "what colour is", or the question."""
    for stem in ("where is", "what colour is"):
        if question.startswith(stem):
            return stem
    return question


@torch.inference_mode()
def demo_moments(model: Pi05Model, normalization: Normalization, worlds: int = 24,
                 first_world: int = 0, camera_hz: float = 15.0, window_s: float = 0.14,
                 show_progress: bool = False) -> dict:
    """The demo's questions (what `make run` asks, at its moments) on every camera frame an
    answer there can read: the engine answers over the newest frame when it takes a
    question up, one taken from the question's moment to window_s later. The accuracy
    `make run` can expect from a model on unseen worlds, and each miss. camera_hz: the
    demo bag's camera rate (ros/bag.py's DemoBagSpec)."""

    sampler = Sampler(model, normalization, seed=0)
    right, asked, misses = Counter(), Counter(), []
    done = progress.bar(worlds, "demo moments", "world", disable=not show_progress)
    for seed in range(first_world, first_world + worlds):
        world = TabletopWorld(seed)
        for (moment, question), (_, template) in zip(demo_dialogue(world), DEMO_QUESTIONS):
            key = f"{moment:g} s {template.format(target='<target>')!r}"
            for frame in range(math.ceil(moment * camera_hz - 1e-9),
                               math.floor((moment + window_s) * camera_hz + 1e-9) + 1):
                t = frame / camera_hz
                answer = reply(model, *prefilled(model, sampler.observation(world, t)), question)
                truth = dict(questions(world, t))[question]
                right[key] += answer == truth
                asked[key] += 1
                if answer != truth:
                    misses.append({"world": seed, "t": round(t, 3), "question": question,
                                   "answer": answer, "truth": truth})
        done.update()
    done.close()
    return {"answer_accuracy": sum(right.values()) / sum(asked.values()), "worlds": worlds,
            "first_world": first_world, "questions": sum(asked.values()),
            "answer_accuracy_by_moment": {k: right[k] / asked[k] for k in asked},
            "misses": misses}


def compare_manifest(result: dict, manifest: Optional[dict], first_world: int,
                     worlds: int) -> str:
    """Whether the unseen-world metrics equal a checkpoint's manifest (set in result as
    manifest_metrics_match where the worlds are the manifest's); the line saying so."""
    if manifest is None:
        return ""
    shipped, measured = manifest["metrics"], result["unseen_worlds"]
    if first_world != 0 or shipped["worlds"] != worlds:
        return (f"the manifest's metrics: not compared (they judge worlds 0-"
                f"{shipped['worlds'] - 1})")
    result["manifest_metrics_match"] = all(
        abs(measured[key] - shipped[key]) < 1e-6
        for key in ("answer_accuracy", "memory_accuracy", "action_error"))
    return "the manifest's metrics: " + ("equal" if result["manifest_metrics_match"]
                                         else f"DIFFERENT (manifest: {shipped})")


def report_lines(result: dict, first_world: int, worlds: int, manifest_line: str) -> list[str]:
    """evaluate-demo's report: the headline numbers, the manifest's verdict, each miss."""
    measured, moments = result["unseen_worlds"], result["demo_moments"]
    lines = [f"unseen worlds {first_world}-{first_world + worlds - 1}: answers "
             f"{measured['answer_accuracy']:.3f} ({measured['questions']} questions), memory "
             f"{measured['memory_accuracy']:.3f} ({measured['memory_requests']}), action error "
             f"{measured['action_error']:.4f}"]
    lines += [manifest_line] if manifest_line else []
    lines.append(f"demo questions on the frames make run answers them over: "
                 f"{moments['answer_accuracy']:.3f} ({moments['questions']} questions)")
    lines += [f"  at {moment}: {accuracy:.2f}"
              for moment, accuracy in moments["answer_accuracy_by_moment"].items()]
    lines += ["misses:"] if moments["misses"] else []
    lines += [f"  world {miss['world']} at {miss['t']:.2f} s: {miss['question']!r} -> "
              f"{miss['answer']!r} (truth {miss['truth']!r})" for miss in moments["misses"]]
    return lines
