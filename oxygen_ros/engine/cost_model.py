"""StepCostModel: online estimates of what language work costs, to fit it into a frame.

Decode steps are fitted as a + b * batch (least squares over a sliding window; a batched
step mostly streams the weights once, so a dominates); request prompts and prefix
prefills cost per token (the median rate of the window, so one slow call cannot inflate
the estimate). The first sample of each kind is the cold call (allocations, lazy
initialisation) and is dropped. Work of a kind never measured estimates None: the
language loop runs it only as a frame's guaranteed minimum, which measures it — an
unknown or cold estimate can never block work forever.
"""

from collections import deque
from statistics import median
from typing import Optional


class StepCostModel:
    def __init__(self, window: int = 64):
        self._decode = deque(maxlen=window)       # (batch, seconds)
        self._extend = deque(maxlen=window)       # (tokens, seconds)
        self._prefill = deque(maxlen=window)      # (tokens, seconds)
        self._seen: set[str] = set()

    def _warm(self, kind: str) -> bool:
        if kind in self._seen:
            return True
        self._seen.add(kind)
        return False

    def observe_decode(self, batch: int, seconds: float) -> None:
        if self._warm("decode"):
            self._decode.append((batch, seconds))

    def observe_extend(self, tokens: int, seconds: float) -> None:
        if tokens and self._warm("extend"):
            self._extend.append((tokens, seconds))

    def observe_prefill(self, tokens: int, seconds: float) -> None:
        if tokens and self._warm("prefill"):
            self._prefill.append((tokens, seconds))

    def decode(self, batch: int) -> Optional[float]:
        """Predicted seconds of one decode step over `batch` sequences."""
        if not self._decode:
            return None
        xs = [b for b, _ in self._decode]
        ys = [s for _, s in self._decode]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        var = sum((x - mean_x) ** 2 for x in xs)
        if var == 0:  # one batch size seen so far: assume cost grows at most proportionally
            return median(ys) * max(1.0, batch / xs[0])
        slope = max(0.0, sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / var)
        return max(0.0, mean_y + slope * (batch - mean_x))

    def extend_per_token(self) -> Optional[float]:
        """Predicted seconds per request token run through the model."""
        return median(s / t for t, s in self._extend) if self._extend else None

    def prefill(self, tokens: int) -> Optional[float]:
        """Predicted seconds to compute `tokens` prefix tokens (0 if they are cached)."""
        if not tokens:
            return 0.0
        return median(s / t for t, s in self._prefill) * tokens if self._prefill else None
