"""Test helpers: run a job in-process, read tables, compare every table with the oracle."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from lakehouse import catalog, consistency, maintenance, refresh, runner
from lakehouse.config import Lakehouse
from lakehouse.spark import release_engine_sessions
from lakehouse_tools.engine import free_port
from lakehouse_tools.oracle import WATERMARK_DELAY_MS, Expected, expected_from_landing
from lakehouse_tools.oracle_lines import file_lines, line_verdict

# Every task of the catalog, in DAG order.
PIPELINE = tuple(entry.task for entry in catalog.tasks())
START = datetime(2026, 11, 20, 0, tzinfo=UTC)
# The jobs that are not a table's task.
OPERATIONS = {
    "full_refresh": refresh.main,
    "consistency_check": consistency.main,
    "maintenance": maintenance.main,
}


@contextmanager
def private_engine(
    state_dir: Path, setenv: Callable[[str, str], None], metastore_root: str | None = None
) -> Iterator[None]:
    """An engine of the caller's own on a free port of 127.0.0.1, its state in ``state_dir``,
    named to this process's jobs through ``setenv``; stopped at the end.

    ``metastore_root``: the lakehouse root whose metastore the engine takes (its ``LAKEHOUSE_ROOT``,
    given to the engine alone: this process's stays as it is); default, this process's.
    """
    engine = {
        "LAKEHOUSE_ENGINE_PORT": str(free_port()),
        # An explicit URL wins over the port; an in-process Airflow task of an earlier test sets one.
        "LAKEHOUSE_ENGINE_URL": "",
        "LAKEHOUSE_ENGINE_DIR": str(state_dir),
    }
    for name, value in engine.items():
        setenv(name, value)
    # Started and stopped with the environment of now: the caller's may have changed by the end.
    env = {**os.environ, **engine, **({"LAKEHOUSE_ROOT": metastore_root} if metastore_root else {})}
    subprocess.run([sys.executable, "-m", "lakehouse_tools.engine", "up"], check=True, env=env)
    try:
        yield
    finally:
        subprocess.run(
            [sys.executable, "-m", "lakehouse_tools.engine", "down"], check=False, env=env
        )


def run_job(name: str, lakehouse: Lakehouse, *args: str) -> dict | None:
    """Run a table's task, or one of the OPERATIONS, in this process, on the test session."""
    argv = ["--lakehouse-root", lakehouse.root, *args]
    if name in OPERATIONS:
        try:
            return OPERATIONS[name](argv)
        finally:  # as the runner does for a task: else the process stays in Spark Connect mode
            release_engine_sessions()
    return runner.run(name, argv)


def run_by_spark_submit(name: str, lakehouse: Lakehouse) -> None:
    """Run a table's task as the DAG's spark-submit tasks do (a driver of its own, local[2], with the
    fast-start options of a short run: lakehouse.spark.fast_start_java_options), without table
    names (the tests read by path): its writes reach this process's Spark through the files only
    (no shared cache)."""
    from lakehouse_tools.fault_harness.launch import job_environment, spark_submit_command

    done = subprocess.run(
        spark_submit_command(name, lakehouse),
        env={**job_environment(lakehouse), "LAKEHOUSE_METASTORE": "none"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"{name} failed ({done.returncode}): {done.stderr[-3000:]}"


def run_pipeline(lakehouse: Lakehouse, *args: str, up_to: str | tuple[str, ...] = ()) -> None:
    """One incremental run of every task, in DAG order (``args`` go to the tasks with a batch form).

    ``up_to`` (tables): only the tasks those tables need, and their own, for a test of them alone.
    """
    names = (up_to,) if isinstance(up_to, str) else up_to
    for entry in tasks_up_to(*names) if names else catalog.tasks():
        run_job(entry.task, lakehouse, *(args if entry.batch else ()))


def tasks_up_to(*names: str) -> list[catalog.TableSpec]:
    """The tasks writing ``names`` and every task they read from, directly or not, in DAG order."""
    needed = {catalog.task(catalog.get(name).written_by or name).name for name in names}
    for entry in reversed(
        catalog.tasks()
    ):  # downstream first: a task's upstream is found before it is visited
        if entry.name in needed:
            needed |= {upstream.name for upstream in catalog.upstream_tasks(entry)}
    return [entry for entry in catalog.tasks() if entry.name in needed]


def gold_tables() -> list[catalog.TableSpec]:
    return [entry for entry in catalog.tables() if entry.layer == "gold"]


def table(spark: SparkSession, lakehouse: Lakehouse, name: str) -> DataFrame:
    return spark.read.format("delta").load(lakehouse.table(name).path)


def table_version(spark: SparkSession, lakehouse: Lakehouse, name: str) -> int:
    return (
        spark.sql(f"DESCRIBE HISTORY delta.`{lakehouse.table(name).path}` LIMIT 1")
        .collect()[0]
        .version
    )


def oracle(lakehouse: Lakehouse) -> Expected:
    return expected_from_landing(lakehouse.landing_events, lakehouse.landing_campaigns)


def hourly_late_events(lakehouse: Lakehouse) -> int:
    """The late events the sessions query records when every landing hour folder is run on its own, in order.

    Plain Python from the landing files, as the oracle reads them: each hour's run admits, in one
    micro-batch, the valid events first seen in its folder; an event is late when it lies behind
    the watermark the earlier runs moved (the newest event time they admitted less the delay).
    """
    with open(lakehouse.landing_campaigns, newline="", encoding="utf-8") as handle:
        ads = {row["ad_id"]: row["campaign_id"] for row in csv.DictReader(handle)}
    folders: dict[Path, list[Path]] = {}
    for path in sorted(Path(lakehouse.landing_events).rglob("*.jsonl")):
        folders.setdefault(path.parent, []).append(path)
    seen: set[str] = set()
    watermark, late = None, 0
    for files in folders.values():  # path order: date, then hour
        admitted = []
        for path in files:
            for line in file_lines(path.read_bytes()):
                reason, event = line_verdict(line, ads)
                if reason is None and event["event_id"] not in seen:
                    seen.add(event["event_id"])
                    admitted.append(int(event["event_time"]))
        late += sum(1 for ms in admitted if watermark is not None and ms < watermark)
        if admitted:
            newest = max(admitted) - WATERMARK_DELAY_MS
            watermark = newest if watermark is None else max(watermark, newest)
    return late


def rows_of(spark: SparkSession, lakehouse: Lakehouse, name: str) -> Counter:
    """A table's rows as a multiset of tuples in its declared column order."""
    columns = catalog.get(name).column_names
    return Counter(tuple(row) for row in table(spark, lakehouse, name).select(*columns).collect())


def expected_rows(expected: Expected, name: str) -> Counter:
    columns = catalog.get(name).column_names
    return Counter(tuple(row[column] for column in columns) for row in expected.rows(name))


def assert_gold_matches_oracle(
    spark: SparkSession,
    lakehouse: Lakehouse,
    expected: Expected | None = None,
    names: tuple[str, ...] = (),
) -> Expected:
    """Every gold table (or those ``names``) equals the plain-Python oracle (default: over the landing files), row for row."""
    expected = expected or oracle(lakehouse)
    for name in names or [entry.name for entry in gold_tables()]:
        actual, wanted = rows_of(spark, lakehouse, name), expected_rows(expected, name)
        assert actual == wanted, f"{name}: {_diff(actual, wanted)}"
    return expected


def _diff(actual: Counter, expected: Counter) -> str:
    missing, extra = expected - actual, actual - expected
    return f"{sum(missing.values())} row(s) missing, e.g. {list(missing)[:3]}; {sum(extra.values())} extra, e.g. {list(extra)[:3]}"


def assert_tables_match_oracle(
    spark: SparkSession,
    lakehouse: Lakehouse,
    expected: Expected | None = None,
    gold: tuple[str, ...] = (),
) -> Expected:
    """Bronze, silver, quarantine and gold (or the ``gold`` tables) agree with the oracle (default: over the landing zone)."""
    expected = assert_silver_matches_oracle(spark, lakehouse, expected)
    assert_gold_matches_oracle(spark, lakehouse, expected, names=gold)
    return expected


def assert_silver_matches_oracle(
    spark: SparkSession, lakehouse: Lakehouse, expected: Expected | None = None
) -> Expected:
    """Bronze, silver and the quarantine agree with the oracle: every line once, every valid event once."""
    expected = expected or oracle(lakehouse)
    assert table(spark, lakehouse, "bronze.ad_events").count() == expected.lines
    silver_ids = [
        row.event_id
        for row in table(spark, lakehouse, "silver.ad_events").select("event_id").collect()
    ]
    assert len(silver_ids) == len(set(silver_ids)), "silver holds an event twice"
    assert set(silver_ids) == set(expected.events)
    # A resolved row's line was admitted by a later backfill: the oracle counts it as valid.
    quarantine = table(spark, lakehouse, "silver.quarantine_ad_events").filter(
        "resolved_at IS NULL"
    )
    quarantine = quarantine.groupBy("reason").count().collect()
    assert {row.reason: row["count"] for row in quarantine} == dict(expected.quarantined)
    return expected


# Rollback (tests/integration/test_rollback.py, tests/scheduler/test_operator_walkthrough.py)

# Silver and gold with their side tables: what rollback restores (bronze, the raw log, stays).
ROLLED_BACK = [
    t.name
    for q in catalog.tasks()
    if q.streamed and not q.source
    for t in catalog.written_by_task(q)
]


def rolled_back_versions(lakehouse: Lakehouse) -> dict[str, int]:
    """The version of each table rollback restores."""
    from deltalake import DeltaTable

    return {name: DeltaTable(lakehouse.table(name).path).version() for name in ROLLED_BACK}


def committed_batches(lakehouse: Lakehouse) -> dict[str, int]:
    """Per streaming query downstream of bronze: how many batches its checkpoint has committed."""
    return {
        q.name: sum(
            1
            for p in Path(lakehouse.table(q.name).checkpoint(), "commits").iterdir()
            if p.name.isdigit()
        )
        for q in catalog.tasks()
        if q.streamed and not q.source
    }


def rollback_plan(
    kept: dict[str, int],
    kept_batches: dict[str, int],
    lakehouse: Lakehouse,
    now: dict[str, int] | None = None,
) -> list[str]:
    """A rollback dry run's steps, transaction ids left out: the tables back to versions ``kept``
    from ``now`` (default: their versions now), the checkpoints back to ``kept_batches`` batches."""
    now = now or rolled_back_versions(lakehouse)
    batches = committed_batches(lakehouse)
    readers = {q.name for q in catalog.tasks() if "silver.ad_events" in q.upstream and q.streamed}
    lines = []
    for query in (q for q in catalog.tasks() if q.streamed and not q.source):
        for name in (t.name for t in catalog.written_by_task(query)):
            if kept[name] != now[name]:
                lines.append(f"would: {name}: restore version {kept[name]} (now {now[name]})")
        if kept_batches[query.name] != batches[query.name]:
            lines.append(
                f"would: {query.name}: checkpoint {lakehouse.table(query.name).checkpoint()} "
                f"forgets batches {kept_batches[query.name]} and later"
            )
        if query.name in readers:
            lines.append(
                f"would: {query.name}: reads silver.ad_events on from after its RESTORE commit"
            )
    return lines


# Object storage (tests/s3)


def s3_requests(settings: dict) -> dict:
    """Requests the server has served, by method."""
    import json

    with urllib.request.urlopen(f"{settings['AWS_ENDPOINT_URL_S3']}/_lakehouse/requests") as answer:
        return json.load(answer)


def s3_faults(settings: dict, action: str = "", **fault: str) -> dict:
    """The server's faults (include/s3/server.py, ``Faults``): arm one (``hold=`` or
    ``lose_answer=`` a key pattern), ``action="/drop"`` what is held; what is armed, held, lost."""
    import json

    url = f"{settings['AWS_ENDPOINT_URL_S3']}/_lakehouse/faults{action}"
    data = json.dumps(fault).encode() if fault else (b"" if action else None)
    with urllib.request.urlopen(urllib.request.Request(url, data=data)) as answer:
        return json.load(answer)


def local_files_named_like(root: str) -> list[str]:
    """Local paths that a path mistaken for a local one would have created (``s3a:/bucket/...``)."""
    found = []
    for base in (Path.cwd(), Path(__file__).resolve().parents[1]):
        mistaken = base / root.split("://")[0]
        if mistaken.exists():
            found += [str(p) for p in mistaken.rglob("*")]
    return found


def view_line(event_id: str, ad_id: str, millis: int) -> str:
    """A landing line: a valid view of ``ad_id`` by user u-1 at ``millis`` (epoch ms)."""
    return json.dumps(
        {
            "event_id": event_id,
            "user_id": "u-1",
            "page_id": "p-1",
            "ad_id": ad_id,
            "ad_type": "banner",
            "event_type": "view",
            "event_time": str(millis),
            "ip_address": "10.0.0.1",
        }
    )
