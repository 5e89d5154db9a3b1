"""Progress of long work (benchmarks, training, evaluation) with tqdm: a live bar on a
terminal; off it (a log file, CI) one plain line per update, every 10 s and at the end."""

import sys

from tqdm import tqdm


class _Lines:
    """The file tqdm writes to off a terminal: each refresh is a line of its own instead
    of a carriage return over the last."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        text = text.strip("\r\n")
        if text:
            self.stream.write(text + "\n")

    def flush(self) -> None:
        self.stream.flush()


def bar(total: int, desc: str, unit: str = "it", disable: bool = False, stream=None) -> tqdm:
    stream = stream or sys.stderr
    if stream.isatty():
        return tqdm(total=total, desc=desc, unit=unit, file=stream, disable=disable)
    return tqdm(total=total, desc=desc, unit=unit, file=_Lines(stream), disable=disable,
                mininterval=10.0, ncols=100, ascii=True)
