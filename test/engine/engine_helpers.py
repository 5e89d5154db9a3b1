"""Engine test helpers: observation streams, engine configs, and event collection."""

import numpy as np

from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.observation import Observation

CAMERAS = ("base", "left_wrist")


def stream(count, seed=0, period=0.1, size=28, camera_every=1):
    rng = np.random.default_rng(seed)
    out, images = [], None
    for i in range(count):
        if i % camera_every == 0:
            images = {c: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for c in CAMERAS}
        out.append(Observation(images, rng.uniform(-1, 1, 6), "stack the blocks", i * period))
    return out


def config(**overrides):
    defaults = dict(camera_names=CAMERAS, num_pages=256, page_size=16, tokens_per_frame=3,
                    max_tokens_per_frame=6, dialogue_max_tokens=12, memory_max_tokens=8,
                    memory_period_s=0.5, stop_at_eos=False)
    return EngineConfig(**(defaults | overrides))


class Events:
    def __init__(self, engine):
        self.chunks, self.texts, self.summaries = [], [], []
        engine.on_chunk, engine.on_text, engine.on_memory = (
            self.chunks.append, self.texts.append, self.summaries.append)

    def text_by_request(self):
        out = {}
        for chunk in self.texts:
            out.setdefault((chunk.kind, chunk.request_id), []).append(chunk)
        return {key: "".join(c.text for c in chunks) for key, chunks in out.items()}
