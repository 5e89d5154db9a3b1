"""Counts the service and action responses this process could not send.

rmw_fastrtps waits only the writer's max_blocking_time for a client's reader to match
before it gives up on a response; rclpy then issues a RuntimeWarning ("failed to send
response (timeout)") instead of raising, and Python shows it once per place in the code.
The client never hears its answer (an Ask goal still runs, unheard) and nothing says so
again. Once installed, every such warning is counted (the inference node reports the count
as lost_responses) and the first is shown as before."""

import threading
import warnings

MESSAGE = "failed to send response"

_lock = threading.Lock()
_count = 0


def install() -> None:
    """Count from now on (the count is the process's). Idempotent; again after a
    warnings.catch_warnings() block has put the previous hook back."""
    warnings.filterwarnings("always", message=MESSAGE, category=RuntimeWarning)
    show = warnings.showwarning
    if getattr(show, "counts_lost_responses", False):
        return

    def count_and_show(message, category, filename, lineno, file=None, line=None):
        global _count
        if issubclass(category, RuntimeWarning) and str(message).startswith(MESSAGE):
            with _lock:
                _count += 1
                if _count > 1:
                    return
        show(message, category, filename, lineno, file, line)

    count_and_show.counts_lost_responses = True
    warnings.showwarning = count_and_show


def count() -> int:
    """Responses lost since install()."""
    with _lock:
        return _count
