"""Small hourly runs on the warm engine: queries interpreted below a size (the default) vs always compiled.

Usage (from the repository, after ``make setup``):
    python -m bench.code_generation [--reps 2] [--hours 3] [--out BENCHMARKS.md]

Each repetition starts a fresh engine of its own (port 15008, state in ``.local/bench/codegen``) per
way, in alternating order (chosen, compiled, compiled, chosen, ...), and runs in it: 3 producer
hours at 0.2 events/s processed by one pipeline run (every task, in DAG order, in this process:
what `airflow dags test` runs, without Airflow), then ``--hours`` single new hours, each followed
by one pipeline run. "chosen" is the jobs' default (:func:`lakehouse.spark.fit_code_generation`:
these tables are far below its threshold, so every query is interpreted); "compiled" sets the
threshold to 0 bytes, as before this benchmark's change. Reported per new hour: the pipeline's
wall seconds and the engine's CPU seconds (its server JVM, from ``/proc``). The first hours on a
fresh engine include its JIT's warm-up; the last hours are the steady state.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.harness import markers, proc_stats
from bench.render import publish
from lakehouse.spark import GENERATED_CODE_FROM_BYTES

PROJECT_DIR = Path(__file__).resolve().parents[1]
START = datetime(2026, 11, 20, 0, tzinfo=UTC)

WORK = PROJECT_DIR / ".local" / "bench" / "codegen"
BEGIN, END = markers("bench/code_generation.py")
WAYS = ("chosen", "compiled")


def log(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def engine_cpu() -> float:
    """CPU seconds so far of the engine's server JVM (with any children it reaped)."""
    from lakehouse_tools import engine

    return proc_stats()[engine.server_pid()][1]


def one_way(way: str, hours: int) -> list[tuple[float, float]]:
    """(wall s, engine CPU s) of each new hour's pipeline run, on a fresh engine, ``way`` chosen."""
    import lakehouse.spark
    from lakehouse import catalog, runner
    from lakehouse.config import Lakehouse
    from lakehouse_tools.generator import write_campaigns, write_hours

    lakehouse.spark.GENERATED_CODE_FROM_BYTES = (
        0 if way == "compiled" else GENERATED_CODE_FROM_BYTES
    )
    root = WORK / "lakehouse"
    shutil.rmtree(root, ignore_errors=True)
    lake = Lakehouse(root=str(root))
    write_campaigns(lake, seed=31)
    write_hours(lake, START, 3, events_per_second=0.2, seed=31)
    subprocess.run(
        [sys.executable, "-m", "lakehouse_tools.engine", "up"], check=True, capture_output=True
    )
    try:
        pipeline = [
            spec.task for spec in catalog.tasks()
        ]  # every task, in DAG order, in this process
        for task in pipeline:
            runner.run(task, ["--lakehouse-root", lake.root])
        figures = []
        for hour in range(3, 3 + hours):
            write_hours(lake, START + timedelta(hours=hour), 1, events_per_second=0.2, seed=31)
            cpu, started = engine_cpu(), time.monotonic()
            for task in pipeline:
                runner.run(task, ["--lakehouse-root", lake.root])
            figures.append((time.monotonic() - started, engine_cpu() - cpu))
            log(
                f"{way}: new hour {hour - 2}: {figures[-1][0]:.1f} s wall, engine {figures[-1][1]:.1f} CPU-s"
            )
        return figures
    finally:
        subprocess.run(
            [sys.executable, "-m", "lakehouse_tools.engine", "down"],
            check=False,
            capture_output=True,
        )


def render(results: dict, options, started: datetime, load: tuple[float, ...], commit: str) -> str:
    lines = [
        BEGIN,
        "",
        "* **Command:** `python -m bench.code_generation "
        f"--reps {options.reps} --hours {options.hours} --out BENCHMARKS.md`",
        f"* **Date:** {started:%Y-%m-%dT%H:%M:%SZ}; load average at the start {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}; "
        f"{os.cpu_count()} cores; code {commit}",
        "* **Work:** per way and repetition a fresh engine (`local[2]`), 3 hours at 0.2 events/s processed first, "
        f"then {options.hours} single new hours (about 720 events each), each followed by one run of every task in DAG order; "
        "the ways alternate (chosen, compiled, compiled, chosen, ...). CPU = the engine's server JVM.",
        "",
        "| new hour | chosen (interpreted): wall s | engine CPU s | compiled: wall s | engine CPU s | CPU compiled / chosen |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for hour in range(options.hours):
        cells = []
        for way in WAYS:
            walls = [rep[hour][0] for rep in results[way]]
            cpus = [rep[hour][1] for rep in results[way]]
            cells += [
                f"{statistics.median(walls):.1f} ({min(walls):.1f}–{max(walls):.1f})",
                f"{statistics.median(cpus):.1f} ({min(cpus):.1f}–{max(cpus):.1f})",
            ]
        ratio = statistics.median(r[hour][1] for r in results["compiled"]) / statistics.median(
            r[hour][1] for r in results["chosen"]
        )
        lines.append(f"| {hour + 1} | {' | '.join(cells)} | {ratio:.2f}× |")
    lines += ["", f"Median (min–max) over {options.reps} repetition(s).", "", END, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--hours", type=int, default=3)
    parser.add_argument("--out", help="replace this benchmark's section in that Markdown file")
    options = parser.parse_args(argv)
    os.environ.update(
        LAKEHOUSE_ENGINE="connect",
        LAKEHOUSE_ENGINE_PORT="15008",
        LAKEHOUSE_ENGINE_DIR=str(WORK / "engine"),
    )
    started, load = datetime.now(UTC), os.getloadavg()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=PROJECT_DIR
    ).stdout.strip()
    results: dict[str, list] = {way: [] for way in WAYS}
    for rep in range(options.reps):
        for way in WAYS if rep % 2 == 0 else WAYS[::-1]:
            log(f"rep {rep + 1}/{options.reps}: {way}")
            results[way].append(one_way(way, options.hours))
    publish(
        render(results, options, started, load, commit),
        options.out,
        None,
        {},
        benchmark="code_generation",
    )


if __name__ == "__main__":
    main()
