"""A run's ops records (progress reports, check results) appended by Spark on the warm engine vs by delta-rs.

Usage (from the repository, after ``make setup``):
    python -m bench.ops_records [--reps 2] [--appends 20] [--out BENCHMARKS.md]

Every task of an hourly run appends a few rows to ``ops.query_progress`` and
``ops.expectation_results`` once its query has stopped. One fresh engine (port 15009, state in
``.local/bench/ops_records``); in a job's session (built by the project's factory, its queries
interpreted as a small job's are), each way appends ``--appends`` times 6 check results to
``ops.expectation_results``, the ways alternating per repetition: "spark" (a DataFrame of the
rows, Delta's append on the engine: the code before this benchmark's change) and "delta-rs"
(:func:`lakehouse.sinks.append_records`, from this process). Reported per append: wall seconds,
the engine's CPU seconds (its server JVM, from ``/proc``) and this process's. The table is read
back by Spark at the end: it must hold every row appended either way.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]

from bench.harness import (
    markers,
    proc_stats,
)
from bench.render import publish  # noqa: E402

WORK = PROJECT_DIR / ".local" / "bench" / "ops_records"
BEGIN, END = markers("bench/ops_records.py")
WAYS = ("spark", "delta-rs")
ROWS_PER_APPEND = 6


def log(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def check_results(n: int) -> list[dict]:
    """``n`` rows as :func:`lakehouse.expectations.check` writes them."""
    now = datetime.now(UTC)
    hour = now.replace(minute=0, second=0, microsecond=0)
    return [
        {
            "checked_at": now,
            "table_name": "silver.ad_events",
            "rule": f"rule {i}",
            "on_failure": "warn",
            "measure": "count_if(campaign_id IS NULL)",
            "holds": "= 0",
            "hour_start": hour,
            "batch_id": None,
            "observed": 0.0,
            "passed": True,
            "mode": "incremental",
            "airflow_run_id": "bench",
            "airflow_try": 1,
        }
        for i in range(n)
    ]


def measure(options) -> tuple[dict[str, list[tuple[float, float, float]]], int]:
    """Per way, (wall s, engine CPU s, client CPU s) per append, one entry per repetition; rows read back."""
    from lakehouse import catalog
    from lakehouse.config import Lakehouse
    from lakehouse.expectations import RESULTS_TABLE
    from lakehouse.sinks import append_records, ensure_table
    from lakehouse.spark import build_spark_session, fit_code_generation
    from lakehouse_tools import engine

    shutil.rmtree(WORK / "lakehouse", ignore_errors=True)
    lake = Lakehouse(root=str(WORK / "lakehouse"))
    declared, table = catalog.get(RESULTS_TABLE), lake.table(RESULTS_TABLE)
    spark = build_spark_session("bench_ops_records")
    fit_code_generation(spark, 0)
    ensure_table(spark, table)

    def by_spark() -> None:
        rows = check_results(ROWS_PER_APPEND)
        frame = spark.createDataFrame(
            [tuple(r[c] for c in declared.column_names) for r in rows], declared.spark_schema()
        )
        frame.write.format("delta").mode("append").option("mergeSchema", "true").save(
            table.path
        )  # no txn id, as before

    def by_delta_rs() -> None:
        append_records(check_results(ROWS_PER_APPEND), table)

    ways = {"spark": by_spark, "delta-rs": by_delta_rs}
    by_spark(), by_delta_rs()  # both paths warm before anything is timed
    results: dict[str, list] = {way: [] for way in WAYS}
    for rep in range(options.reps):
        for way in WAYS if rep % 2 == 0 else WAYS[::-1]:
            cpu, client, started = (
                proc_stats()[engine.server_pid()][1],
                time.process_time(),
                time.monotonic(),
            )
            for _ in range(options.appends):
                ways[way]()
            n = options.appends
            results[way].append(
                (
                    (time.monotonic() - started) / n,
                    (proc_stats()[engine.server_pid()][1] - cpu) / n,
                    (time.process_time() - client) / n,
                )
            )
            log(
                f"rep {rep + 1}: {way}: {results[way][-1][0]:.3f} s, engine {results[way][-1][1]:.3f} CPU-s per append"
            )
    stored = spark.read.format("delta").load(table.path).count()
    expected = (2 + 2 * options.reps * options.appends) * ROWS_PER_APPEND
    if stored != expected:
        raise SystemExit(f"{RESULTS_TABLE} holds {stored} rows, {expected} were appended")
    return results, stored


def render(
    results: dict, stored: int, options, started: datetime, load: tuple[float, ...], commit: str
) -> str:
    def cell(way: str, i: int, digits: int) -> str:
        values = [rep[i] for rep in results[way]]
        return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"

    lines = [
        BEGIN,
        "",
        f"* **Command:** `python -m bench.ops_records --reps {options.reps} --appends {options.appends} --out BENCHMARKS.md`",
        f"* **Date:** {started:%Y-%m-%dT%H:%M:%SZ}; load average at the start {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}; "
        f"{os.cpu_count()} cores; code {commit}",
        f"* **Work:** one fresh engine (`local[2]`); per way and repetition {options.appends} appends of "
        f"{ROWS_PER_APPEND} check results to `ops.expectation_results`, in a job's session (queries interpreted, "
        f"as a small job's); the ways alternate (spark, delta-rs, delta-rs, spark, ...). Read back by Spark: {stored} rows, "
        "every one appended.",
        "",
        "| per append | spark (Delta on the engine) | delta-rs (the task's process) | spark / delta-rs |",
        "| --- | ---: | ---: | ---: |",
    ]
    for i, what in enumerate(("wall s", "engine CPU s", "client CPU s")):
        spark_median = statistics.median(rep[i] for rep in results["spark"])
        rs_median = statistics.median(rep[i] for rep in results["delta-rs"])
        ratio = (
            "–"
            if rs_median < 0.0005
            else f"{spark_median / rs_median:.{0 if spark_median > 10 * rs_median else 2}f}×"
        )
        lines.append(f"| {what} | {cell('spark', i, 3)} | {cell('delta-rs', i, 3)} | {ratio} |")
    lines += ["", f"Median (min–max) over {options.reps} repetition(s).", "", END, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--appends", type=int, default=20)
    parser.add_argument("--out", help="replace this benchmark's section in that Markdown file")
    options = parser.parse_args(argv)
    os.environ.update(
        LAKEHOUSE_ENGINE="connect",
        LAKEHOUSE_ENGINE_PORT="15009",
        LAKEHOUSE_ENGINE_DIR=str(WORK / "engine"),
    )
    started, load = datetime.now(UTC), os.getloadavg()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=PROJECT_DIR
    ).stdout.strip()
    subprocess.run(
        [sys.executable, "-m", "lakehouse_tools.engine", "up"], check=True, capture_output=True
    )
    try:
        results, stored = measure(options)
    finally:
        subprocess.run(
            [sys.executable, "-m", "lakehouse_tools.engine", "down"],
            check=False,
            capture_output=True,
        )
    publish(
        render(results, stored, options, started, load, commit),
        options.out,
        None,
        {},
        benchmark="ops_records",
        per_table=False,
    )


if __name__ == "__main__":
    main()
