"""What the running system builds from the tabletop world at time t: camera frames at a
camera's size letterboxed to the model's (as camera_ingest does), the expert's joint
state, the instruction — one prefix (or engine Observation), for training, evaluation,
benchmarks and in-process episodes alike."""

import numpy as np

from oxygen_ros.demo.world import CAMERAS, TabletopWorld
from oxygen_ros.engine.observation import Observation
from oxygen_ros.model.config import ModelConfig
from oxygen_ros.model.letterbox import resize_rgb
from oxygen_ros.model.normalization import Normalization
from oxygen_ros.model.prefix import Prefix, build_prefix
from oxygen_ros.model.prompt import pi05_prompt_tokens

CAMERA_SIZE = (240, 320)        # height, width of the demo bag's cameras


def world_observation(world: TabletopWorld, t: float, size: int) -> Observation:
    """What camera_ingest publishes at sensor time t (images at the model's size)."""
    images = {name: resize_rgb(world.frame(camera, t, *CAMERA_SIZE), size)
              for camera, name in enumerate(CAMERAS)}
    return Observation(images, world.joint_positions(t), world.instruction, t)


def world_prefix(world: TabletopWorld, t: float, config: ModelConfig, tokenizer,
                 normalization: Normalization, cameras=CAMERAS) -> Prefix:
    """cameras: those the observation has (camera_ingest left the others out)."""
    observation = world_observation(world, t, config.vision.image_size)
    joints = observation.state[:config.state_dim]
    state = np.zeros(config.state_dim)
    state[:len(joints)] = joints
    tokens, _ = pi05_prompt_tokens(tokenizer, world.instruction,
                                   normalization.normalize_state(state), config.state_dim,
                                   config.max_prompt_tokens)
    return build_prefix(config, CAMERAS, {name: observation.images[name] for name in cameras},
                        tokens)
