"""An episode of a tabletop world through a serving engine, in-process on a manual clock:
the observations camera_ingest would publish, questions asked at chosen frames, and
every answer (with the frame it was asked on), memory summary and action chunk, scored
against the world's ground truth. Deterministic: the clock moves only between frames,
so every frame runs exactly its language budget (tokens_per_frame)."""

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from oxygen_ros.demo.observe import world_observation
from oxygen_ros.demo.questions import memory_line, questions
from oxygen_ros.demo.score import JOINT_RANGE, same
from oxygen_ros.demo.world import CAMERAS, TabletopWorld
from oxygen_ros.engine.clock import ManualClock
from oxygen_ros.engine.config import EngineConfig


def demo_engine_config(**overrides) -> EngineConfig:
    """The engine as config/humanoid_demo.yaml sets it up, without a frame clock (a frame
    is a step of the episode) and with a memory window every 4 s, as `make run` does."""
    defaults = dict(camera_names=CAMERAS, frame_period_s=None, tokens_per_frame=4,
                    max_tokens_per_frame=8, dialogue_max_tokens=64, memory_max_tokens=64,
                    memory_period_s=4.0)
    return EngineConfig(**(defaults | overrides))


@dataclass
class Episode:
    answers: list[dict] = field(default_factory=list)   # t, question, answer, truth, correct
    memory: list[dict] = field(default_factory=list)    # window_s, summary, truth, correct
    action_error: float = 0.0     # executed part of each chunk vs the expert, / joint range
    overlapped: int = 0           # questions asked while earlier ones were still pending


def run_episode(engine_class, model, normalization, world: TabletopWorld,
                asks: Mapping[int, Sequence[str]], frames: int = 60, period_s: float = 0.2,
                config: EngineConfig = None) -> Episode:
    """Frames at 0, period_s, 2 period_s, ... (sensor time = engine clock); before frame i
    the questions asks[i] are submitted. After the last frame the engine keeps stepping on
    the last observation until every request has ended."""
    clock = ManualClock()
    config = config or demo_engine_config()
    engine = engine_class(model, config, clock=clock, normalization=normalization)
    texts, summaries, chunks = {}, [], []
    engine.on_text = lambda c: texts.setdefault((c.kind, c.request_id), []).append(c)
    engine.on_memory, engine.on_chunk = summaries.append, chunks.append
    size = model.config.vision.image_size
    asked, episode = {}, Episode()
    observation = None
    for i in range(frames):
        t = i * period_s
        clock.set(t)
        for question in asks.get(i, ()):
            episode.overlapped += engine.pending_dialogue > 0
            asked[engine.submit_dialogue(question)] = (t, question)
        observation = world_observation(world, t, size)
        engine.step(observation)
    while engine.pending_requests:
        clock.advance(period_s)
        engine.step(observation)
    for request_id, (t, question) in asked.items():
        answer = "".join(c.text for c in texts.get(("dialogue", request_id), []))
        truth = dict(questions(world, t))[question]
        episode.answers.append({"t": round(t, 3), "question": question, "answer": answer,
                                "truth": truth, "correct": same(answer, truth)})
    for summary in summaries:
        truth = memory_line(world, summary.window_start, summary.window_end)
        episode.memory.append({"window_s": [summary.window_start, summary.window_end],
                               "summary": summary.text, "truth": truth,
                               "correct": same(summary.text, truth)})
    errors, chunks = [], chunks[:frames]      # the chunks of the episode's own frames
    for chunk, following in zip(chunks, chunks[1:] + [None]):
        played = len(chunk.actions) if following is None else max(
            1, round((following.stamp - chunk.stamp) / config.action_dt_s))
        expert = world.actions(chunk.stamp, played, config.action_dt_s)
        errors.append(np.abs(chunk.actions[:played, :expert.shape[1]] - expert).mean())
    episode.action_error = float(np.mean(errors) / JOINT_RANGE)
    return episode
