"""The demo behind ``make demo``: sample data, one hourly DAG run through Airflow, the gold tables.

Usage (from the repository, after ``make setup``; the Makefile sets the environment):
    python -m lakehouse_tools.demo [--hours 3] [--events-per-second 2]

It generates a few hours of YSB events into the landing zone (hours already there are kept),
runs ``airflow dags test ysb_hourly`` (the DAG's own tasks, each a client of the warm engine, or
a spark-submit when the Spark connection says so), then prints the gold tables and checks them
against the independent plain-Python oracle.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lakehouse.config import Lakehouse
from lakehouse_tools.generator import write_campaigns, write_hours
from lakehouse_tools.oracle import expected_from_landing

DEMO_START = datetime(2026, 11, 20, 0, tzinfo=UTC)
SEED = 7


# Every Spark task's last line (SparkJobOperator): "<task> done: {summary}".
TASK_DONE = re.compile(r"(?P<task>\w+) done: (?P<summary>\{.*)")
ROW_COUNTS = re.compile(r"'(rows_written|input_rows|inserted|quarantined)': (\d+)")


def row_counts(summary: str) -> str:
    """A task's row counts from its summary; a query of several tables: the rows each table got
    (the tables it wrote nothing to left out)."""
    counts = ", ".join(f"{k}={v}" for k, v in ROW_COUNTS.findall(summary.split("'tables':")[0]))
    try:  # the log line may go on after the summary (the logger's " [lakehouse] loc=...")
        tables = ast.literal_eval(summary[: summary.rfind("}") + 1]).get("tables") or {}
    except (ValueError, SyntaxError):  # a summary cut short: its counts as found
        return counts
    written = {
        name: sum(note.get("rows_written") or 0 for note in own.get("batches", []))
        or own.get("rows_written")
        or 0
        for name, own in tables.items()
    }
    tables_written = [f"{name}={rows}" for name, rows in written.items() if rows]
    return ", ".join(filter(None, [counts, *tables_written]))


def run_dag(logical_date: datetime, log_path: Path) -> float:
    """One run of the hourly DAG through Airflow; its full output goes to ``log_path``, and a line
    per Spark task as it finishes (task, seconds since the previous one, its summary) to stdout."""
    started = last = time.monotonic()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            ["airflow", "dags", "test", "ysb_hourly", logical_date.isoformat()],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for line in process.stdout:
            log.write(line)
            done = TASK_DONE.search(line)
            if done:
                now = time.monotonic()
                counts = row_counts(done["summary"])
                print(f"  {done['task']:<24} {now - last:>5.0f} s  {counts}", flush=True)
                last = now
        returncode = process.wait()
    output = log_path.read_text()
    if returncode != 0 or "state=success" not in output:
        tail = "\n".join(output.splitlines()[-40:])
        sys.exit(f"The DAG run failed; the last lines of {log_path}:\n{tail}")
    return time.monotonic() - started


# `airflow dags test` brackets each task's output with these lines.
TASK_START = re.compile(r"\[DAG TEST\] starting task_id=(?P<task>[\w.-]+)")
TASK_END = re.compile(r"\[DAG TEST\] end task task_id=(?P<task>[\w.-]+)")


def task_outputs(output: str) -> dict[str, str]:
    """Each task's lines of an ``airflow dags test`` output, from its start line to its end line."""
    chunks: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines(keepends=True):
        started = TASK_START.search(line)
        if started:
            current = started["task"]
        if current is not None:
            chunks.setdefault(current, []).append(line)
        if TASK_END.search(line):
            current = None
    return {task: "".join(lines) for task, lines in chunks.items()}


def write_task_logs(logical_date: datetime, output: str, dag_id: str = "ysb_hourly") -> int:
    """Each task's part of the run's output where the UI reads task logs (``airflow dags test``
    prints them instead, so the UI showed the demo's tasks without logs); the logs written."""
    from airflow.configuration import conf
    from airflow.models.dagrun import DagRun
    from airflow.utils.log.file_task_handler import FileTaskHandler
    from airflow.utils.session import create_session

    handler = FileTaskHandler(conf.get("logging", "base_log_folder"))
    parts = task_outputs(output)
    written = 0
    with create_session() as session:
        run = (
            session.query(DagRun)
            .filter(DagRun.dag_id == dag_id, DagRun.logical_date == logical_date)
            .one()
        )
        for ti in run.get_task_instances(session=session):
            if ti.task_id not in parts:
                continue
            name = handler._render_filename(ti, ti.try_number or 1, session=session)
            path = Path(handler.local_base, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(parts[ti.task_id])
            written += 1
    return written


def fix_run_start(logical_date: datetime, wall_start: datetime) -> None:
    """Give the demo's run its real start time. ``airflow dags test`` records the logical date
    (2026-11-20) as the run's start, so the UI showed a run of several days, which set the scale
    of the grid and the charts and made real runs invisible."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        for run in session.query(DagRun).filter(
            DagRun.dag_id == "ysb_hourly", DagRun.logical_date == logical_date
        ):
            if run.start_date is not None and run.start_date < wall_start:
                run.start_date = wall_start


def print_summary(lakehouse: Lakehouse) -> bool:
    """Print every table of the catalog and compare gold with the oracle; True when they match."""
    from collections import Counter

    from lakehouse import catalog, delta_log
    from lakehouse.spark import build_spark_session, is_remote

    spark = build_spark_session(
        "demo-summary", {"spark.master": "local[2]", "spark.ui.enabled": "false"}
    )
    if not is_remote(spark):  # a Connect session has no JVM here
        spark.sparkContext.setLogLevel("ERROR")

    def read(name):
        return spark.read.format("delta").load(lakehouse.table(name).path)

    print("\nTables (Delta, under {}):".format(lakehouse.root + "/tables"))
    for table in catalog.tables():
        path = lakehouse.table(table.name).path
        if delta_log.is_delta_table(path):  # the ops records of maintenance exist once it has run
            print(f"  {table.name:<28} {read(table.name).count():>8} rows   {path}")

    print("\nQuarantined lines by reason:")
    for row in (
        read("silver.quarantine_ad_events").groupBy("reason").count().orderBy("reason").collect()
    ):
        print(f"  {row.reason:<28} {row['count']:>8}")

    expected = expected_from_landing(lakehouse.landing_events, lakehouse.landing_campaigns)
    verdicts = []
    for table in catalog.tables():
        if table.layer != "gold":
            continue
        columns = table.column_names
        print(f"\n{table.name}, first rows:")
        read(table.name).orderBy(*columns).show(5, truncate=False)
        actual = Counter(tuple(row) for row in read(table.name).select(*columns).collect())
        verdicts.append(
            actual == Counter(tuple(row[c] for c in columns) for row in expected.rows(table.name))
        )
    matches = all(verdicts)
    print(
        f"\nOracle (plain Python over the {expected.lines} raw landing lines): "
        f"{len(expected.events)} unique valid events, {expected.duplicates} duplicates, "
        f"{sum(expected.quarantined.values())} quarantined -> gold "
        + ("MATCHES the oracle." if matches else "DIFFERS from the oracle!")
    )
    spark.stop()
    return matches


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=int, default=3)
    parser.add_argument("--events-per-second", type=float, default=2.0)
    args = parser.parse_args(argv)
    lakehouse = Lakehouse.from_env()

    write_campaigns(lakehouse, SEED)
    manifests = write_hours(lakehouse, DEMO_START, args.hours, args.events_per_second, SEED)
    print(
        f"Landing zone {lakehouse.landing_events}: {sum(m.lines for m in manifests)} lines in {args.hours} hour(s)"
    )

    logical_date = DEMO_START + timedelta(hours=args.hours)
    log_path = Path(os.environ.get("AIRFLOW_HOME", lakehouse.root)) / "demo-dag-run.log"
    print(
        f"Running DAG ysb_hourly for logical date {logical_date.isoformat()} through Airflow (log: {log_path}) ..."
    )
    wall_start = datetime.now(UTC)
    seconds = run_dag(logical_date, log_path)
    fix_run_start(logical_date, wall_start)
    write_task_logs(logical_date, log_path.read_text())
    print(f"DAG run succeeded in {seconds:.0f} s.")

    matches = print_summary(lakehouse)
    print(
        "\nAirflow home: {}\nOpen the UI: make airflow-ui (then http://127.0.0.1:{})".format(
            os.environ.get("AIRFLOW_HOME", "?"),
            os.environ.get("PORT") or os.environ.get("AIRFLOW__API__PORT") or 8080,
        )
    )
    sys.exit(0 if matches else 1)


if __name__ == "__main__":
    main()
