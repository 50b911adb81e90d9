"""One contender's run in a process of its own: what bench/engine_compare.py starts and measures.

Usage:
    python -m bench.compare.job project|plain_spark|polars SPEC.json

The spec is :func:`bench.compare.spec_for`'s. The contender's ``run(spec)`` writes its tables and
returns its own figures (wall seconds per step; the project also CPU seconds per task); they go to
the spec's ``result`` file as JSON with the process's own CPU and wall time up to that point. The
figures that count, the whole process tree's CPU and wall time, are measured by the parent.
"""

from __future__ import annotations

import importlib
import json
import resource
import sys
import time
from pathlib import Path

from bench.compare import CONTENDERS, MODULES


def main(argv: list[str]) -> None:
    if len(argv) != 2 or argv[0] not in CONTENDERS:
        raise SystemExit(f"usage: python -m bench.compare.job {'|'.join(CONTENDERS)} SPEC.json")
    contender, spec_path = argv
    spec = json.loads(Path(spec_path).read_text())
    started = time.perf_counter()
    result = importlib.import_module(MODULES[contender]).run(spec)
    used = resource.getrusage(resource.RUSAGE_SELF)
    result["run_wall"] = time.perf_counter() - started
    result["python_cpu"] = (
        used.ru_utime + used.ru_stime
    )  # this process alone (not a JVM child), up to here
    Path(spec["result"]).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
