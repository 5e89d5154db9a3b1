"""oxygen-ros command line: the demo and the tools around the package. One module per
family of verbs (robot, demo, bench); each imports torch, the model or ROS only inside
its handlers, so `oxygen-ros --help` starts without them and `oxygen-ros replay` without
torch."""

import argparse
import signal
import sys

from oxygen_ros.cli import bench, demo, robot
from oxygen_ros.cli.options import Parser


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="oxygen-ros", description=__doc__.split(".")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for family in (demo, robot, bench):
        family.add_commands(sub)
    return parser


def _leave_quietly(*_) -> None:
    """Ctrl-C before a command has set its own handlers (e.g. while torch imports): exit 0,
    ignoring a second signal (Python would die of it while finalizing)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(0)


def main(argv=None) -> int:
    signal.signal(signal.SIGINT, _leave_quietly)
    signal.signal(signal.SIGTERM, _leave_quietly)
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (MemoryError, RuntimeError) as error:
        # torch's CPU allocator and CUDA both raise RuntimeErrors; a settings file or
        # checkpoint config that sizes a buffer past the machine ends here in one line
        if not isinstance(error, MemoryError) and not _out_of_memory(str(error)):
            raise
        print(f"oxygen-ros {args.command}: out of memory: {_allocation(str(error))}",
              file=sys.stderr)
        return 1


def _out_of_memory(message: str) -> bool:
    return any(words in message.lower() for words in ("can't allocate memory", "not enough memory",
                                                      "out of memory"))


def _allocation(message: str) -> str:
    """The sentence of the allocator's message that names the size, without its C++ frame."""
    for sentence in message.replace("\n", " ").split(". "):
        if "allocate" in sentence:
            return sentence.split("DefaultCPUAllocator: ")[-1].strip().rstrip(".")
    return message.splitlines()[0] if message else "MemoryError"
