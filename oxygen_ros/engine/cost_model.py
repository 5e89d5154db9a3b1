"""StepCostModel: online estimates of what language work costs, to fit it into a budget.

Decode steps are fitted as a + b * batch (least squares over a sliding window; a batched
step mostly streams the weights once, so a dominates); request prompts and prefix
prefills (resuming a preempted request may need one) cost per token.
Before the first measurement the estimate is `prior` (the engine sets it to the frame's
measured action cost: a decode step is far cheaper than a whole chunk), so an unknown
step never runs unless the budget could absorb it.
"""

from collections import deque


class StepCostModel:
    def __init__(self, window: int = 64):
        self._decode = deque(maxlen=window)       # (batch, seconds)
        self._extend = deque(maxlen=window)       # (tokens, seconds)
        self._prefill = deque(maxlen=window)      # (tokens, seconds)
        self.prior = 0.0

    def observe_decode(self, batch: int, seconds: float) -> None:
        self._decode.append((batch, seconds))

    def observe_extend(self, tokens: int, seconds: float) -> None:
        self._extend.append((tokens, seconds))

    def observe_prefill(self, tokens: int, seconds: float) -> None:
        if tokens:
            self._prefill.append((tokens, seconds))

    def decode(self, batch: int) -> float:
        """Predicted seconds of one decode step over `batch` sequences."""
        if not self._decode:
            return self.prior
        xs = [b for b, _ in self._decode]
        ys = [s for _, s in self._decode]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        var = sum((x - mean_x) ** 2 for x in xs)
        if var == 0:  # one batch size seen so far: assume cost grows at most proportionally
            return max(ys) * max(1.0, batch / xs[0])
        slope = max(0.0, sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / var)
        return max(0.0, mean_y + slope * (batch - mean_x))

    def extend(self, tokens: int) -> float:
        """Predicted seconds to run `tokens` request tokens through the model."""
        return self._per_token(self._extend, tokens)

    def prefill(self, tokens: int) -> float:
        """Predicted seconds to compute `tokens` prefix tokens (0 if they are cached)."""
        return self._per_token(self._prefill, tokens)

    def _per_token(self, samples: deque, tokens: int) -> float:
        if not samples:
            return self.prior
        return sum(s for _, s in samples) / max(1, sum(t for t, _ in samples)) * tokens
