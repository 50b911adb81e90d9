"""The sessions' late-event path (issue 56): reconciling 100,000 pending late events, in CPU seconds.

Usage (from the repository, after ``make setup``; ``make bench-reconcile`` runs it):
    python -m bench.reconcile_late [--late 100000] [--hours 12] [--events-per-second 4] [--out BENCHMARKS.md] [--summary bench/results/summary.json]

One process, one local Spark driver (``local[2]``, the tests' settings), a fresh lakehouse under
``.local/bench/reconcile``: the project's generator lands ``--hours`` producer hours and the tasks
the sessions need run once (not timed). Then ``--late`` of silver's events are recorded as pending
in ``ops.late_session_events``, as the sessions query records a late event, and
:func:`lakehouse.flows.sessions.reconcile` runs once, timed: it recomputes their users' sessions
from silver, replaces them and marks the settled events. CPU is this process's tree (its JVM and
Python workers, ``/proc``). Checked: every late event is reconciled or still pending, and the
sessions table is unchanged (the events were in silver all along, so the sessions were right).
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.data import landed
from bench.harness import PROJECT_DIR, local_driver, log, timed
from bench.render import publish
from lakehouse import catalog, runner

START = datetime(2026, 11, 20, tzinfo=UTC)
SEED = 56
# A catch-up's hours lie well in the past: silver quarantines events a day ahead of their ingestion.
CATCH_UP_START = datetime(2026, 10, 1, tzinfo=UTC)
SESSIONS = next(t for t in catalog.tasks() if t.write is catalog.Write.SESSIONS)


def measure(late: int, hours: int, eps: float, work: Path) -> dict:
    """Land, run the sessions' tasks, record ``late`` pending late events, time one reconcile."""
    from helpers import tasks_up_to
    from pyspark.sql import functions as F

    from lakehouse.flows.sessions import reconcile

    spark = local_driver("bench-reconcile")
    lakehouse, _ = landed(work, START, hours, eps, SEED)
    for entry in tasks_up_to(SESSIONS.name):
        runner.run(entry.task, ["--lakehouse-root", lakehouse.root])
    target = lakehouse.table(SESSIONS.name)
    silver, late_table = target.upstream_tables()[0], target.side("late")
    events = spark.read.format("delta").load(silver.path)
    silver_events = events.count()
    if silver_events < late:
        raise SystemExit(
            f"silver holds fewer than {late} events: raise --hours or --events-per-second"
        )
    # The late events as the stream records them (lakehouse.flows.sessions.late_rows), pending.
    chosen = events.orderBy(F.xxhash64("event_id")).limit(late)
    declared = {f.name: f.dataType for f in late_table.spec.spark_schema().fields}
    given = {
        "event_id": F.col("event_id"),
        "user_id": F.col("user_id"),
        "event_time": F.col("event_time"),
        "batch_id": F.lit(0),
        "watermark": F.col("event_time"),
        "recorded_at": F.current_timestamp(),
    }
    chosen.select(
        *[given.get(name, F.lit(None)).cast(kind).alias(name) for name, kind in declared.items()]
    ).write.format("delta").mode("append").save(late_table.path)
    sessions_before = spark.read.format("delta").load(target.path).collect()

    with timed() as took:
        reconciled = reconcile(spark, target, "bench reconcile")
        reconciled.release()

    sessions_after = spark.read.format("delta").load(target.path).collect()
    if sorted(sessions_before) != sorted(sessions_after):
        raise SystemExit("the reconcile changed sessions that were right")
    if reconciled.late_reconciled + reconciled.late_pending != late:
        raise SystemExit(f"{reconciled.figures()} do not add up to {late} late events")
    users = spark.read.format("delta").load(late_table.path).select("user_id").distinct().count()
    spark.stop()
    return {
        "late": late,
        "users": users,
        "silver_events": silver_events,
        "sessions": len(sessions_before),
        "cpu_s": round(took["cpu_s"], 1),
        "wall_s": round(took["wall_s"], 1),
        **reconciled.figures(),
    }


def catch_up(days: int, files_per_hour: int, eps: float, work: Path) -> dict:
    """Land ``days`` of hours, run every task once (a catch-up), count its late events and hourly runs'."""
    from helpers import assert_gold_matches_oracle, hourly_late_events

    spark = local_driver("bench-catch-up")
    lakehouse, manifests = landed(
        work, CATCH_UP_START, days * 24, eps, SEED, files_per_hour=files_per_hour
    )
    lines = sum(m.lines for m in manifests)
    tasks, wall = {}, time.perf_counter()
    for entry in catalog.tasks():
        with timed() as took:
            runner.run(entry.task, ["--lakehouse-root", lakehouse.root])
        tasks[entry.task] = round(took["cpu_s"], 1)
        log(f"catch-up {entry.task}: {tasks[entry.task]} CPU-s")
    wall = time.perf_counter() - wall
    late = spark.read.format("delta").load(lakehouse.table("ops.late_session_events").path).count()
    assert_gold_matches_oracle(spark, lakehouse, names=(SESSIONS.name, "gold.open_sessions"))
    spark.stop()
    return {
        "days": days,
        "files": days * 24 * files_per_hour,
        "lines": lines,
        "cpu_s": round(sum(tasks.values()), 1),
        "wall_s": round(wall, 1),
        "tasks": tasks,
        "late": late,
        "hourly_late": hourly_late_events(lakehouse),
    }


def render(figures: dict, hours: int, eps: float, started: datetime) -> str:
    return "\n".join(
        [
            f"* **Command:** `python -m bench.reconcile_late --late {figures['late']} --hours {hours} "
            f"--events-per-second {eps:g}` (`make bench-reconcile`)",
            f"* **Date:** {started:%Y-%m-%dT%H:%M:%SZ}; {os.cpu_count()} cores; one local[2] driver",
            f"* **Work:** {figures['silver_events']:,} silver events ({hours} generated hours), "
            f"{figures['sessions']:,} closed sessions; {figures['late']:,} of the events recorded as "
            f"pending late events, of {figures['users']:,} users; one reconcile: their sessions "
            "recomputed from silver and replaced, the settled events marked. The sessions table "
            "was checked unchanged afterwards.",
            "",
            "| late events | reconciled | pending | CPU-s | wall s |",
            "| ---: | ---: | ---: | ---: | ---: |",
            f"| {figures['late']:,} | {figures['late_reconciled']:,} | {figures['late_pending']:,} | "
            f"{figures['cpu_s']} | {figures['wall_s']} |",
        ]
    )


def render_catch_up(done: dict, args, started: datetime) -> str:
    per_task = ", ".join(f"{task} {cpu}" for task, cpu in done["tasks"].items())
    return "\n".join(
        [
            f"* **Command:** `python -m bench.reconcile_late --catch-up-days {done['days']} --files-per-hour "
            f"{args.files_per_hour} --events-per-second {args.events_per_second:g}`",
            f"* **Date:** {started:%Y-%m-%dT%H:%M:%SZ}; {os.cpu_count()} cores; one local[2] driver",
            f"* **Work:** {done['days']} days landed ({done['files']:,} files, {done['lines']:,} lines), every "
            "task run once in DAG order; the sessions tables checked against the oracle. Hour-by-hour "
            "runs' late events counted from the landing files (tests/helpers.hourly_late_events, checked "
            "against real hourly runs in tests/integration/test_user_sessions.py).",
            "",
            "| CPU-s | wall s | late events recorded | hour-by-hour runs' late events |",
            "| ---: | ---: | ---: | ---: |",
            f"| {done['cpu_s']} | {done['wall_s']} | {done['late']:,} | {done['hourly_late']:,} |",
            "",
            f"CPU-s per task: {per_task}.",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--late", type=int, default=100_000)
    parser.add_argument("--hours", type=int, default=12)
    parser.add_argument("--events-per-second", type=float, default=4.0)
    parser.add_argument("--work-dir", default=str(PROJECT_DIR / ".local" / "bench" / "reconcile"))
    parser.add_argument(
        "--catch-up-days", type=int, help="instead: a catch-up of that many days in one run"
    )
    parser.add_argument("--files-per-hour", type=int, default=16)
    parser.add_argument("--out", help="render this Markdown file from the results")
    parser.add_argument("--summary", help="update this benchmark's keys in that JSON file")
    args = parser.parse_args(argv)
    started = datetime.now(UTC)
    if args.catch_up_days:
        work = Path(args.work_dir).with_name("catch_up")
        done = catch_up(args.catch_up_days, args.files_per_hour, args.events_per_second, work)
        print(done, flush=True)
        key = f"catch_up_{done['days']}d"
        publish(
            render_catch_up(done, args, started),
            args.out,
            args.summary,
            {
                f"{key}_cpu_s": done["cpu_s"],
                f"{key}_late_events": done["late"],
                "hourly_late_events_same_files": done["hourly_late"],
            },
            benchmark="catch_up",
        )
        return
    figures = measure(args.late, args.hours, args.events_per_second, Path(args.work_dir))
    log(
        f"reconcile of {figures['late']:,} late events: {figures['cpu_s']} CPU-s, {figures['wall_s']} s"
    )
    key = f"reconcile_{figures['late'] // 1000}k_late_cpu_s"
    publish(
        render(figures, args.hours, args.events_per_second, started),
        args.out,
        args.summary,
        {key: figures["cpu_s"]},
        benchmark="reconcile_late",
        per_table=False,
    )


if __name__ == "__main__":
    main()
