"""DialogueTask: a text request (any time) becomes a LanguageRequest whose tokens stream out."""

import torch

from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.request import LanguageRequest

DIALOGUE_PRIORITY = 2


class DialogueTask:
    def __init__(self, tokenizer, config: EngineConfig):
        self.tokenizer = tokenizer
        self.config = config

    def request(self, request_id: int, text: str, now: float,
                max_tokens: int | None = None, robot: str = "") -> LanguageRequest:
        prompt = self.tokenizer.encode(self.config.dialogue_template.format(text=text), bos=False)
        limit = self.config.max_request_tokens
        return LanguageRequest(
            id=request_id, kind="dialogue", priority=DIALOGUE_PRIORITY, prompt=prompt[:limit],
            max_tokens=max_tokens or self.config.dialogue_max_tokens, arrival=now,
            stream=self.tokenizer.stream(),
            generator=torch.Generator().manual_seed(self.config.seed * 7919 + request_id),
            truncated=len(prompt) > limit, robot=robot)
