"""How many CPU threads torch's intra-op pool may use next to the control loop.

On a small machine the node's other work (DDS, message decoding, the 50 Hz control timer)
must keep a core: torch threads that spin-wait on a core the OS gave to someone else
stall every parallel region. Measured with `make run` on 2 cores (small preset): the
action path took the same time with 1 and 2 torch threads under the demo's load, while
2 threads left nothing for the rest. Default: every core this process may run on but one.
"""

import os


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        return os.cpu_count() or 1


def choose_torch_threads(requested: int = 0) -> int:
    """requested > 0: exactly that; 0: all available cores but one (at least one)."""
    if requested < 0:
        raise ValueError("torch_threads must be 0 (automatic) or positive")
    return requested or max(1, available_cores() - 1)


def apply_torch_threads(requested: int = 0) -> int:
    """Set torch's intra-op threads for this process; the number set."""
    import torch

    threads = choose_torch_threads(requested)
    torch.set_num_threads(threads)
    return threads
