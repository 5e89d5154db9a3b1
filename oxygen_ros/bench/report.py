"""What every benchmark shares: timing medians, percentiles, the JSON file and matplotlib
without a display."""

import json
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np


def median_ms(work: Callable[[], object], repeats: int, warm: bool = False,
              sync: Optional[Callable[[], None]] = None) -> float:
    """Median wall time of work() in ms over `repeats` runs (after one untimed run if warm);
    sync() waits for the device before each clock reading (CUDA's asynchronous kernels)."""
    sync = sync or (lambda: None)
    if warm:
        work()
    times = []
    for _ in range(repeats):
        sync()
        started = time.perf_counter()
        work()
        sync()
        times.append((time.perf_counter() - started) * 1e3)
    return float(np.median(times))


def percentile_ms(seconds, q: float) -> float:
    """The q-th percentile (interpolated) of durations in seconds, in ms; NaN if none."""
    return float(np.percentile(np.asarray(seconds) * 1e3, q)) if len(seconds) else float("nan")


def write_json(data, path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2) + "\n")
    return out


def save_figure(figure, path, dpi: int = 110) -> None:
    """Write a matplotlib figure (laid out tight) to path, making missing folders, and close it."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    pyplot().close(figure)


def pyplot():
    """matplotlib.pyplot on the Agg backend: plots are files, no display needed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
