"""DialogueTask: a text request (any time) becomes a LanguageRequest whose tokens stream out."""

from oxygen_ros.engine.config import EngineConfig
from oxygen_ros.engine.request import LanguageRequest, sampling_generator
from oxygen_ros.model.prompt import fit_text

DIALOGUE_PRIORITY = 2


class DialogueTask:
    def __init__(self, tokenizer, config: EngineConfig):
        self.tokenizer = tokenizer
        self.config = config

    def request(self, request_id: int, text: str, now: float,
                max_tokens: int | None = None, robot: str = "") -> LanguageRequest:
        prompt, truncated = self.prompt(text)
        return LanguageRequest(
            id=request_id, kind="dialogue", priority=DIALOGUE_PRIORITY, prompt=prompt,
            max_tokens=max_tokens or self.config.dialogue_max_tokens, arrival=now,
            stream=self.tokenizer.stream(),
            generator=sampling_generator(self.config.seed, "dialogue", robot, request_id),
            truncated=truncated, robot=robot)

    def prompt(self, text: str) -> tuple[list[int], bool]:
        """The templated request's tokens, at most max_request_tokens, and whether the text
        was cut to fit: its end goes, the template's cue to answer stays."""
        template = self.config.dialogue_template
        return fit_text(text, lambda part: self.tokenizer.encode(template.format(text=part),
                                                                 bos=False),
                        self.config.max_request_tokens)
