"""python -m oxygen_ros.cli: the oxygen-ros command."""

import sys

from oxygen_ros.cli import main

sys.exit(main())
