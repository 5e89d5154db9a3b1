"""Point the ROS 2 wheels' exported CMake files at this interpreter's include dirs.

The wheels were built under /opt/python/cpXY-cpXY/ and their CMake targets name that
Python's include directory and its numpy include directory; CMake refuses targets whose
include directories do not exist. Rewrites both paths in PREFIX/share/**/*.cmake.
Idempotent: a second run finds nothing to rewrite.
"""

import re
import sys
import sysconfig
from pathlib import Path

import numpy

PY_INCLUDE = re.compile(r"/opt/python/cp3\d+-cp3\d+/include/python3\.\d+")
NUMPY_INCLUDE = re.compile(
    r"/opt/python/cp3\d+-cp3\d+/lib/python3\.\d+/site-packages/numpy/_core/include")


def main(prefix: str) -> int:
    replacements = ((NUMPY_INCLUDE, numpy.get_include()),
                    (PY_INCLUDE, sysconfig.get_paths()["include"]))
    changed = 0
    for path in Path(prefix, "share").rglob("*.cmake"):
        text = path.read_text()
        new = text
        for pattern, target in replacements:
            new = pattern.sub(target, new)
        if new != text:
            path.write_text(new)
            changed += 1
    print(f"fix_ros_wheel_cmake: rewrote {changed} file(s) under {prefix}/share")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else sys.prefix))
