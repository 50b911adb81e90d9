"""Driver JVM options for short runs: CPU and wall time of a whole pipeline pass, one spark-submit per job.

Usage (from the repository, after ``make setup driver-cds``):
    python -m bench.driver_start [--reps 3] [--hours 2 --events-per-second 0.1] [--out BENCHMARKS.md]

Every repetition runs the pipeline (every task of the table catalog, in DAG order) over the same
generated landing data into a fresh lakehouse once per option set, the sets in a rotated order, as
the DAG's tasks and the fault-injection harness run them: one ``spark-submit --master local[2]
jobs/run.py <task>`` per task. CPU seconds are the job's processes' user + system time (the JVM and the Python
driver); on a shared machine they move far less than wall time, so they are the figure to compare.

``--out`` saves the section as ``bench/results/driver_start.json`` and renders that file
(BENCHMARKS.md) from the results (:mod:`bench.render`).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bench.harness import markers
from bench.render import publish
from bench.ysb.measuring import run_measured
from lakehouse import catalog
from lakehouse.config import Lakehouse, jar_paths
from lakehouse.spark import FAST_START_JAVA_OPTIONS, driver_cds_archive, fast_start_java_options
from lakehouse_tools.generator import parse_hour, write_campaigns, write_hours

PROJECT_DIR = Path(__file__).resolve().parents[1]
# Every task of the catalog, in DAG order: one spark-submit of jobs/run.py each.
JOBS = tuple(entry.task for entry in catalog.tasks())
BEGIN, END = markers("bench/driver_start.py")


def option_sets() -> dict[str, str]:
    """The driver JVM options compared, from the JVM's defaults to the project's fast start."""
    sets = {
        "JVM defaults (C2 JIT, G1)": "",
        "C1 JIT only": "-XX:TieredStopAtLevel=1",
        "C1 + SerialGC": " ".join(FAST_START_JAVA_OPTIONS),
    }
    if driver_cds_archive().is_file():
        sets["C1 + SerialGC + CDS archive (fast start)"] = fast_start_java_options()
    return sets


def submit_command(job: str, root: str, java_options: str) -> list[str]:
    """The spark-submit line of one task's job (``jobs/run.py <task>``) with these driver JVM options."""
    return [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        "local[2]",
        "--jars",
        ",".join(jar_paths()),
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        *(["--driver-java-options", java_options] if java_options else []),
        str(PROJECT_DIR / "jobs" / "run.py"),
        job,
        "--lakehouse-root",
        root,
    ]


def run_job(job: str, root: str, java_options: str) -> tuple[float, float]:
    """spark-submit one task's job; returns (wall seconds, CPU seconds of its processes)."""
    command = submit_command(job, root, java_options)
    done, wall, cpu = run_measured(
        command, capture_output=True, text=True, env={**os.environ, "LAKEHOUSE_ROOT": root}
    )
    if done.returncode != 0:
        raise RuntimeError(f"{job} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, cpu


def measure(options: argparse.Namespace) -> dict:
    sets = option_sets()
    names = list(sets)
    results: dict[str, dict[str, list[tuple[float, float]]]] = {
        name: {job: [] for job in JOBS} for name in names
    }
    work = Path(tempfile.mkdtemp(prefix="driver-start-"))
    data = Lakehouse(root=str(work / "data"))
    write_campaigns(data, options.seed)
    write_hours(
        data, parse_hour(options.start), options.hours, options.events_per_second, options.seed
    )
    lines = sum(1 for p in Path(data.landing_events).rglob("*.jsonl") for _ in p.open("rb"))
    try:
        for rep in range(options.reps):
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for name in order:
                root = work / f"rep{rep}-{names.index(name)}"
                shutil.copytree(Path(data.root) / "landing", root / "landing")
                for job in JOBS:
                    results[name][job].append(run_job(job, str(root), sets[name]))
                shutil.rmtree(root)
                wall = sum(results[name][job][-1][0] for job in JOBS)
                cpu = sum(results[name][job][-1][1] for job in JOBS)
                print(
                    f"rep {rep + 1}/{options.reps} {name}: wall {wall:.1f} s, cpu {cpu:.1f} s",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"sets": sets, "results": results, "lines": lines}


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


def render(measured: dict, options: argparse.Namespace, started: datetime, load: tuple) -> str:
    sets, results = measured["sets"], measured["results"]
    baseline = next(iter(sets))
    out = [
        BEGIN,
        "## 10. Driver JVM options for short runs (one spark-submit per job)",
        "",
        f"* **Command:** `python -m bench.driver_start --reps {options.reps} --hours {options.hours} "
        f"--events-per-second {options.events_per_second} --out BENCHMARKS.md` (after `make driver-cds`)",
        f"* **Date:** {started:%Y-%m-%dT%H:%M:%SZ}; load average at the start {load[0]:.1f}, {load[1]:.1f}, "
        f"{load[2]:.1f}; {os.cpu_count()} cores, {platform.machine()}",
        f"* **Work:** the whole pipeline over {measured['lines']} landing lines, each job a `spark-submit "
        "--master local[2]` as the DAG's tasks and the fault-injection harness run them; a fresh "
        "lakehouse per pass; the option sets in rotated order in every repetition.",
        "* **CPU** = user + system seconds of the job's processes (JVM and Python driver): the figure "
        "to compare on a shared machine. Median (min–max) over the repetitions.",
        "",
        "| driver JVM options | pipeline CPU s | pipeline wall s | CPU vs JVM defaults | "
        + " | ".join(f"{job} CPU s" for job in JOBS)
        + " |",
        "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in JOBS) + " |",
    ]
    reps = len(results[baseline][JOBS[0]])
    base_cpu = [sum(results[baseline][job][i][1] for job in JOBS) for i in range(reps)]
    for name, java_options in sets.items():
        cpu = [sum(results[name][job][i][1] for job in JOBS) for i in range(reps)]
        wall = [sum(results[name][job][i][0] for job in JOBS) for i in range(reps)]
        ratio = [c / b for c, b in zip(cpu, base_cpu)]
        label = f"{name}<br>`{java_options or '(none)'}`"
        per_job = " | ".join(_median([r[1] for r in results[name][job]]) for job in JOBS)
        out.append(
            f"| {label} | {_median(cpu)} | {_median(wall)} | {statistics.median(ratio):.2f}× | {per_job} |"
        )
    out += [
        "",
        "These drivers live 10–30 s and handle little data: most of their CPU goes to loading and "
        "JIT-compiling Spark's and Delta's classes. C1-only compilation and a class-data-sharing "
        "archive of those classes (`make driver-cds`: one JVM runs a job of each kind, "
        "include/lakehouse_tools/jvm_warmup.py) cut that. C2 is what makes a long-running JVM fast, so "
        "`lakehouse.spark.fast_start_java_options()` is for short drivers (the fault-injection "
        "harness uses it), not for long backfills.",
        END,
    ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--hours", type=int, default=2)
    parser.add_argument("--events-per-second", type=float, default=0.1)
    parser.add_argument("--start", default="2026-11-20T00:00Z")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", help="replace this script's section in that Markdown file")
    options = parser.parse_args(argv)
    started, load = datetime.now(UTC), os.getloadavg()
    publish(
        render(measure(options), options, started, load),
        options.out,
        None,
        {},
        benchmark="driver_start",
    )


if __name__ == "__main__":
    main()
