"""``python -m lakehouse_tools.fault_harness``: the fault harness's command (see its ``cli`` module)."""

import sys

from lakehouse_tools.fault_harness.cli import main

sys.exit(main())
