"""One code, two modes: batch recomputation equals the incremental stream, and is idempotent."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from helpers import (
    START,
    assert_tables_match_oracle,
    gold_tables,
    run_job,
    run_pipeline,
    table,
    table_version,
)
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from lakehouse import catalog
from lakehouse.config import Lakehouse
from lakehouse_tools.generator import write_campaigns, write_hours

LINEAGE = ("source_file", "ingested_at")  # which copy of a duplicated event was kept may differ
GOLD = tuple(t.name for t in gold_tables())
# The gold table the single-table tests damage and repair; any gold table would do.
SOME_GOLD = catalog.get("gold.campaign_hourly")


@pytest.fixture(scope="module")
def two_hours(tmp_path_factory) -> Lakehouse:
    """Two hours streamed through every layer: shared by the tests below, which run in file order.

    One incremental run for the three of them (it cost each a minute or two of CI): the backfill
    test repairs what it damaged before it ends, so the consistency check starts from tables that
    agree, and the full refresh, last, rebuilds from upstream whatever the check damaged.
    """
    lakehouse = Lakehouse(root=str(tmp_path_factory.mktemp("batch_mode") / "lakehouse"))
    write_campaigns(lakehouse, seed=44)
    write_hours(lakehouse, START, 2, events_per_second=0.05, seed=44)
    run_pipeline(lakehouse)
    return lakehouse


def snapshot(spark, lakehouse):
    silver = table(spark, lakehouse, "silver.ad_events").drop(*LINEAGE)
    return {
        "silver.ad_events": silver.cache(),
        **{n: table(spark, lakehouse, n).cache() for n in GOLD},
    }


def recompute(lakehouse, start, end):
    for job in (t.task for t in catalog.tasks() if t.batch):
        run_job(job, lakehouse, "--mode", "batch", "--start", start, "--end", end)


@pytest.mark.long  # CI's budget (4 min): backfills equal to the oracle and rerun idempotently stay in tests/scheduler, hours touched below
def test_batch_recompute_equals_the_stream_and_is_idempotent(spark, lakehouse):
    write_campaigns(lakehouse, seed=41)
    for hour in range(3):  # three hourly availableNow runs, late events included
        write_hours(lakehouse, START + timedelta(hours=hour), 1, events_per_second=0.05, seed=41)
        run_pipeline(lakehouse)
    streamed = snapshot(spark, lakehouse)
    hours = sorted(
        r.h
        for r in table(spark, lakehouse, "silver.ad_events")
        .select(F.date_trunc("hour", "event_time").alias("h"))
        .distinct()
        .collect()
    )
    start, end = f"{hours[0]:%Y-%m-%dT%H:00Z}", f"{hours[-1] + timedelta(hours=1):%Y-%m-%dT%H:00Z}"

    recompute(lakehouse, start, end)
    for name, rows in streamed.items():
        actual = table(spark, lakehouse, name)
        assertDataFrameEqual(actual.drop(*LINEAGE) if name.startswith("silver") else actual, rows)

    recompute(lakehouse, start, end)  # the same backfill twice: the same content
    for name, rows in streamed.items():
        actual = table(spark, lakehouse, name)
        assertDataFrameEqual(actual.drop(*LINEAGE) if name.startswith("silver") else actual, rows)
    assert_tables_match_oracle(spark, lakehouse)


def test_backfill_touches_only_its_hours(spark, two_hours):
    lakehouse = two_hours
    hourly = lakehouse.table(SOME_GOLD.name).path
    # Damage both hours; a backfill of 01:00 repairs 01:00 and leaves 00:00 as it is.
    spark.sql(
        f"UPDATE delta.`{hourly}` SET views = -1 WHERE hour_start >= TIMESTAMP'2026-11-20 00:00:00'"
    )

    # Its task writes five tables; --tables recomputes this one alone.
    others = [t.name for t in catalog.task_members(SOME_GOLD) if t.name != SOME_GOLD.name]
    before = {name: table_version(spark, lakehouse, name) for name in others}
    summary = run_job(
        SOME_GOLD.task,
        lakehouse,
        "--mode",
        "batch",
        "--start",
        "2026-11-20T01:00Z",
        "--end",
        "2026-11-20T02:00Z",
        "--tables",
        SOME_GOLD.name,
    )
    assert list(summary["tables"]) == [SOME_GOLD.name]
    assert {name: table_version(spark, lakehouse, name) for name in others} == before
    summary = summary["tables"][SOME_GOLD.name]

    gold = table(spark, lakehouse, SOME_GOLD.name)
    views_by_hour = {
        r.hour_start.hour: r.bad
        for r in gold.groupBy("hour_start")
        .agg(F.sum(F.when(F.col("views") == -1, 1).otherwise(0)).alias("bad"))
        .collect()
        if r.hour_start.day == 20
    }
    assert views_by_hour[0] > 0 and views_by_hour[1] == 0
    # The summary says what the backfill's commit wrote: the hour's rows, in the table's newest version.
    newest = spark.sql(f"DESCRIBE HISTORY delta.`{hourly}`").agg(F.max("version")).first()[0]
    hour_rows = gold.filter(
        F.col("hour_start") == F.lit("2026-11-20 01:00:00").cast("timestamp")
    ).count()
    assert (summary["rows_written"], summary["rows_deleted"], summary["version"]) == (
        hour_rows,
        hour_rows,
        newest,
    ), summary
    # Put back the hours left damaged, for the next tests of the shared lakehouse.
    damaged = [
        r.h
        for r in gold.where("views = -1")
        .select(F.col("hour_start").alias("h"))
        .distinct()
        .collect()
    ]
    start, end = min(damaged), max(damaged) + timedelta(hours=1)
    run_job(
        SOME_GOLD.task,
        lakehouse,
        "--mode",
        "batch",
        "--start",
        f"{start:%Y-%m-%dT%H:00Z}",
        "--end",
        f"{end:%Y-%m-%dT%H:00Z}",
    )
    assert table(spark, lakehouse, SOME_GOLD.name).where("views = -1").count() == 0


def test_consistency_check_finds_exactly_the_damaged_hours(spark, two_hours, capsys):
    lakehouse = two_hours
    interval = ("--start", "2026-11-20T00:00Z", "--end", "2026-11-20T02:00Z")
    # Tables that agree report nothing: the report below names the damaged hour alone (a check of
    # the sessions alone exiting 0 with "no differences": tests/integration/test_user_sessions.py).
    damaged = lakehouse.table(SOME_GOLD.name).path
    spark.sql(
        f"DELETE FROM delta.`{damaged}` WHERE hour_start = TIMESTAMP'2026-11-20 01:00:00' AND views = 1"
    )
    with pytest.raises(SystemExit) as exit_info:
        run_job("consistency_check", lakehouse, *interval)
    assert exit_info.value.code == 1
    report = [
        line.split()
        for line in capsys.readouterr().out.splitlines()
        if line.strip().startswith(("silver", "gold"))
    ]
    assert [(row[0], row[1], row[2]) for row in report] == [(SOME_GOLD.name, "2026-11-20", "01:00")]
    assert (
        report[0][3] == "0" and int(report[0][4]) > 0
    )  # rows missing from live, present in the recomputation


def test_full_refresh_rebuilds_from_upstream_with_a_new_checkpoint_generation(spark, two_hours):
    lakehouse = two_hours  # the consistency check's damage included: the rebuild repairs it
    silver = lakehouse.table("silver.ad_events")
    old_checkpoint = silver.checkpoint()

    run_job("full_refresh", lakehouse, "--layer", "silver")
    assert table(spark, lakehouse, "silver.ad_events").count() == 0
    assert all(table(spark, lakehouse, name).count() == 0 for name in GOLD)
    queries = [
        t.name for t in catalog.tasks() if t.layer == "gold"
    ]  # a side table lives under its writer's checkpoint
    assert [
        silver.current_generation(),
        *(lakehouse.table(name).current_generation() for name in queries),
    ] == [1] * (1 + len(queries))
    assert lakehouse.table("bronze.ad_events").current_generation() == 0
    assert Path(old_checkpoint, "offsets").is_dir(), "the old checkpoint is kept aside"

    run_pipeline(lakehouse)
    assert_tables_match_oracle(spark, lakehouse)
