"""Training samples from tabletop worlds: the frames, questions, memory requests and patch
targets train-demo learns from and evaluate-demo asks, deterministic from a seed."""

import numpy as np
import torch

from oxygen_ros.demo.observe import CAMERA_SIZE, world_prefix
from oxygen_ros.demo.questions import PLACES, memory_line, place, questions
from oxygen_ros.demo.world import (BASE_VIEW, COLORS, PHASES, SHAPES, THING_RADIUS,
                                   TabletopWorld)
from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.model import training
from oxygen_ros.model.letterbox import resize_rgb
from oxygen_ros.model.normalization import Normalization
from oxygen_ros.model.pi05 import Pi05Model
from oxygen_ros.model.prefix import Prefix, image_pixels
from oxygen_ros.model.tokenizer import ByteTokenizer

TRAIN_SEEDS = 10_000           # training worlds: seeds from here up; below are unseen
EPISODE_S, ACTION_DT = 12.0, 0.02
MEMORY_PERIOD_S = 4.0
TEMPLATES = EngineConfig()     # the engine's dialogue and memory templates
# what a base-camera patch shows: (nothing + colours, nothing + shapes, nothing + places)
PATCH_CLASSES = (1 + len(COLORS), 1 + len(SHAPES), 1 + len(PLACES))


class Sampler:
    """Training samples from tabletop worlds, deterministic from a seed."""

    def __init__(self, model: Pi05Model, normalization: Normalization, seed: int,
                 first_world: int = TRAIN_SEEDS):
        self.config = model.config
        self.normalization = normalization
        self.rng = np.random.default_rng(seed)
        self.first_world = first_world
        self.tokenizer = ByteTokenizer()

    def observation(self, world: TabletopWorld, t: float) -> Prefix:
        """The prefix the running system would build at time t."""
        return world_prefix(world, t, self.config, self.tokenizer, self.normalization)

    def memory(self, world: TabletopWorld, t: float) -> tuple[str, str]:
        """The memory request that ends the window [t - period, t], and its true summary
        (the summary before it, if any, is in the request as the engine writes it)."""
        previous = (memory_line(world, t - 2 * MEMORY_PERIOD_S, t - MEMORY_PERIOD_S)
                    if t > 1.5 * MEMORY_PERIOD_S else "")
        # frame numbers as the engine counts them, at a frame rate of 2-10 Hz
        rate = self.rng.uniform(2.0, 10.0)
        first = round(rate * max(0.0, t - MEMORY_PERIOD_S)) + int(self.rng.integers(0, 3))
        prompt = TEMPLATES.memory_template.format(previous=previous[-200:], first=first,
                                                  last=max(first + 1, round(rate * t)))
        return prompt, memory_line(world, max(0.0, t - MEMORY_PERIOD_S), t)

    def requests(self, world: TabletopWorld, t: float, memory: bool
                 ) -> list[tuple[str, str, list[int]]]:
        """Every question about the frame at t (and the memory request, at a window's end)
        in the engine's templates, with the true replies and, per reply byte (and its
        end), the colour (1 + its index in COLORS; 0: none) of the thing whose base-camera
        patches that byte is to be looked up in: every byte of "where is the <thing>?"'s
        and "what colour is the <shape>?"'s replies, and each shape named in "what do you
        see?"'s."""
        by_name = {thing.name: thing for thing in world.things}
        colour_id = {color: 1 + index for index, color in enumerate(COLORS)}
        out = []
        for question, reply in questions(world, t):
            look = [0] * (len(reply) + 1)
            if question.startswith("where is the "):
                look = [colour_id[by_name[question[13:-1]].color]] * len(look)
            elif question.startswith("what colour is the "):
                look = [colour_id[reply]] * len(look)
            elif question == "what do you see?":
                for thing in world.things:
                    at = reply.index(f"a {thing.name}") + len(f"a {thing.color} ")
                    look[at:at + len(thing.shape)] = [colour_id[thing.color]] * len(thing.shape)
            out.append((TEMPLATES.dialogue_template.format(text=question), reply, look))
        if memory:
            prompt, reply = self.memory(world, t)
            out.append((prompt, reply, [0] * (len(reply) + 1)))
        return out

    def text(self, requests: list[tuple[str, str, list[int]]]
             ) -> tuple[list, list, list, list]:
        """(tokens, answer flags, request index, colour to look at) of requests packed
        after one prefix; a reply byte's colour is set on the position that predicts it."""
        tokens, flags, segment, look = [], [], [], []
        for index, (prompt, reply, colours) in enumerate(requests):
            asked = self.tokenizer.encode(prompt, bos=False)
            answer = self.tokenizer.encode(reply, bos=False) + [self.tokenizer.eos_id]
            assert len(colours) == len(answer)       # the byte tokenizer: a byte a token
            tokens += asked + answer
            flags += [False] * len(asked) + [True] * len(answer)
            segment += [index] * (len(asked) + len(answer))
            look += [0] * (len(asked) - 1) + colours + [0]
        return tokens, flags, segment, look

    def moment(self) -> float:
        """A time in the episode: half the time anywhere, half the time inside a phase
        drawn uniformly, so the short release gets its share of questions."""
        if self.rng.random() < 0.5:
            return self.rng.uniform(0, EPISODE_S)
        bounds = [0.0, *(end for _, end in PHASES), EPISODE_S]
        phase = int(self.rng.integers(len(bounds) - 1))
        return self.rng.uniform(bounds[phase], bounds[phase + 1])

    def seeing(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Base-camera images [size, 3, S, S] of random moments in random worlds, and what
        their patches show ([size, patches, 3])."""
        images, patches = [], []
        for _ in range(size):
            world = TabletopWorld(self.first_world + int(self.rng.integers(1_000_000)))
            t = self.rng.uniform(0, EPISODE_S)
            size = self.config.vision.image_size
            images.append(image_pixels(resize_rgb(world.frame(0, t, *CAMERA_SIZE), size), size))
            patches.append(patch_targets(world, t, self.config.vision))
        return torch.stack(images), torch.tensor(np.stack(patches))

    def batch(self, size: int, memory_share: float
              ) -> tuple[training.TrainingBatch, torch.Tensor]:
        """The batch, and what each patch of its base camera shows ([B, patches, 3])."""
        prefixes, texts, flags, segments, looks, actions, patches = [], [], [], [], [], [], []
        for _ in range(size):
            world = TabletopWorld(self.first_world + int(self.rng.integers(1_000_000)))
            memory = self.rng.random() < memory_share
            if memory:   # a memory request comes when a window ends
                t = MEMORY_PERIOD_S * int(self.rng.integers(1, 3)) + self.rng.uniform(0, 0.5)
            else:
                t = self.moment()
            prefixes.append(self.observation(world, t))
            patches.append(patch_targets(world, t, self.config.vision))
            tokens, answer, segment, look = self.text(self.requests(world, t, memory))
            texts.append(tokens)
            flags.append(answer)
            segments.append(segment)
            looks.append(look)
            expert = world.actions(t, self.config.action_horizon, ACTION_DT)
            actions.append(np.stack([self.normalization.actions.normalize(a) for a in expert]))
        prompt, prompt_valid = _pad([p.tokens.tolist() for p in prefixes])
        text, text_valid = _pad(texts)
        answer, _ = _pad(flags)
        segment, _ = _pad(segments)
        colour, _ = _pad(looks)
        patches = torch.tensor(np.stack(patches))
        images = torch.stack([p.images for p in prefixes])
        # the base camera's image tokens come first in the prefix
        look = torch.zeros(size, text.shape[1], images.shape[1] * patches.shape[1]
                           + prompt.shape[1], dtype=torch.bool)
        look[:, :, :patches.shape[1]] = ((patches[:, None, :, 0] == colour[:, :, None])
                                         & (colour[:, :, None] > 0))
        return training.TrainingBatch(
            images=images, prompt=prompt, prompt_valid=prompt_valid, text=text,
            text_valid=text_valid, answer=answer.bool(),
            actions=torch.tensor(np.stack(actions), dtype=torch.float32), segment=segment,
            look=look), patches


def patch_targets(world: TabletopWorld, t: float, vision) -> np.ndarray:
    """[patches, 3] (colour, shape, place) indices of the thing nearest each patch of the
    base camera's letterboxed frame that the thing's drawing touches, counted from 1 in
    COLORS, SHAPES and questions.PLACES; (0, 0, 0) where none does. The carried thing,
    drawn on top, owns every patch it touches. The geometry is world.frame's (camera 0)
    followed by the letterbox of observe.py."""
    height, width = CAMERA_SIZE
    side = max(height, width)
    scale = side / BASE_VIEW * vision.image_size / side    # table units -> model pixels
    new_height = int(height / (side / vision.image_size))
    top = (vision.image_size - new_height) // 2 - (side - height) // 2 * vision.image_size / side
    n, patch = vision.image_size // vision.patch_size, vision.patch_size
    out = np.zeros((n * n, 3), np.int64)
    best = np.full(n * n, np.inf)
    lo = np.arange(n) * patch
    for index in world.drawing_order(t):
        thing = world.things[index]
        x, y, z, where = world.where(index, t)
        cx, cy = vision.image_size / 2 + x * scale, top + vision.image_size / 2 + y * scale
        radius = THING_RADIUS * scale * (1 + z)
        half_width = radius * (1.5 if thing.shape == "box" else 1.0)
        dx = np.maximum(np.maximum(lo - cx, cx - (lo + patch)), 0)          # per column
        dy = np.maximum(np.maximum(lo - cy, cy - (lo + patch)), 0)          # per row
        touches = ((dy[:, None] <= radius) & (dx[None, :] <= half_width)).ravel()
        centres = np.hypot((lo[None, :] + patch / 2 - cx), (lo[:, None] + patch / 2 - cy)).ravel()
        # the carried thing is drawn last, over whatever it touches
        nearer = touches & ((centres < best) | (where == "gripper"))
        out[nearer] = (1 + list(COLORS).index(thing.color), 1 + SHAPES.index(thing.shape),
                       1 + PLACES.index(place(world, index, t)))
        best[nearer] = centres[nearer]
    return out


def _pad(rows):
    width = max(len(r) for r in rows)
    values = torch.tensor([list(r) + [0] * (width - len(r)) for r in rows])
    valid = torch.tensor([[True] * len(r) + [False] * (width - len(r)) for r in rows])
    return values, valid
