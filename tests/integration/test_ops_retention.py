"""Ops tables keep their declared retention: maintenance trims old rows (not the newest failed
check of an hour, which still gates it), checkpoints and trims the log, and says what it freed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from lakehouse import catalog, delta_log
from lakehouse.expectations import RESULTS_TABLE, still_failing
from lakehouse.maintenance import main as maintain
from lakehouse.sinks import append_records, ensure_table

GATING_RULE = "every event has a campaign"  # silver.ad_events' fail rule


def _result(checked_at: datetime, hour: datetime, passed: bool, rule: str = GATING_RULE) -> dict:
    return {
        "checked_at": checked_at,
        "table_name": "silver.ad_events",
        "rule": rule,
        "on_failure": "fail",
        "measure": "count_if(x IS NULL)",
        "holds": "= 0",
        "hour_start": hour,
        "batch_id": None,
        "observed": 0.0 if passed else 1.0,
        "passed": passed,
        "mode": "incremental",
        "airflow_run_id": None,
        "airflow_try": None,
    }


def test_maintenance_trims_ops_rows_past_their_retention_and_says_what_it_freed(spark, lakehouse):
    now = datetime.now(UTC).replace(microsecond=0)
    old, recent = now - timedelta(days=40), now - timedelta(days=1)
    h1, h2, h3 = (datetime(2026, 1, 1, n, tzinfo=UTC) for n in (1, 2, 3))
    table = lakehouse.table(RESULTS_TABLE)
    ensure_table(spark, table)
    rows = [
        _result(old, h1, True),  # old, passed: trimmed
        _result(old, h2, False),  # old, the newest check of h2, failed: kept, h2 still gated
        _result(old, h3, False),  # old failure fixed by a later pass: trimmed
        _result(old + timedelta(hours=1), h3, True),  # old pass, newest of h3: trimmed
        _result(recent, h1, True),  # within the retention: kept
    ]
    for row in rows:  # one commit each, as runs append them
        append_records([row], table)
    spec = catalog.get(RESULTS_TABLE)
    assert still_failing(lakehouse, catalog.get("silver.ad_events")) == [h2]

    records = maintain(["--lakehouse-root", lakehouse.root, "--table", RESULTS_TABLE])

    kept = sorted(
        (r.hour_start, r.passed)
        for r in spark.read.format("delta")
        .load(table.path)
        .select("hour_start", "passed")
        .collect()
    )
    assert kept == [(h1.replace(tzinfo=None), True), (h2.replace(tzinfo=None), False)]
    assert still_failing(lakehouse, catalog.get("silver.ad_events")) == [h2]
    by_operation = {r["operation"]: r for r in records}
    assert [r["operation"] for r in records] == ["trim", "optimize", "vacuum", "log"]
    assert by_operation["trim"]["rows_deleted"] == 3
    assert by_operation["trim"]["retention_hours"] == spec.retention.days * 24
    assert by_operation["log"]["retention_hours"] == spec.retention.days * 24
    # The log has a checkpoint now: a reader no longer replays every commit.
    names = [p.name for p in (Path(table.path) / "_delta_log").iterdir()]
    assert f"{delta_log.latest_version(table.path):020d}.checkpoint.parquet" in names
    # The summary (ops.table_maintenance) says what each step did.
    written = (
        spark.read.format("delta")
        .load(lakehouse.table("ops.table_maintenance").path)
        .filter("table_name = 'ops.expectation_results'")
        .select("operation", "rows_deleted")
        .collect()
    )
    assert sorted((r.operation, r.rows_deleted) for r in written) == [
        ("log", None),
        ("optimize", None),
        ("trim", 3),
        ("vacuum", None),
    ]


def _version_row(period: datetime, version: str, whole: bool, at: datetime) -> dict:
    return {
        "table_name": "gold.campaign_hourly",
        "period_start": period,
        "grain": "hour",
        "code_version": version,
        "whole": whole,
        "written_at": at,
        "airflow_run_id": None,
    }


def test_code_version_records_keep_what_judges_a_period_and_no_repeat(spark, lakehouse):
    """Past the retention a period keeps one row per version written since its last whole write:
    the stale periods read the same before and after, from fewer rows."""
    from lakehouse import code_versions

    old = datetime.now(UTC).replace(microsecond=0) - timedelta(days=40)
    p1, p2, p3 = (datetime(2026, 1, 1, n, tzinfo=UTC) for n in (1, 2, 3))
    at = [old + timedelta(hours=n) for n in range(6)]
    rows = [
        # p1: an older version, then a whole write by "new", then repeats: one "new" row stays.
        _version_row(p1, "old", False, at[0]),
        _version_row(p1, "new", True, at[1]),
        _version_row(p1, "new", False, at[2]),
        _version_row(p1, "new", False, at[3]),
        # p2: never written whole, two versions added rows: stale, one row of each stays.
        _version_row(p2, "old", False, at[0]),
        _version_row(p2, "old", False, at[1]),
        _version_row(p2, "new", False, at[2]),
        # p3: written whole by "old" after "new" added rows: stale, only the whole write stays.
        _version_row(p3, "new", False, at[0]),
        _version_row(p3, "old", True, at[1]),
    ]
    table = lakehouse.table(code_versions.RECORDS)
    ensure_table(spark, table)
    append_records(rows, table)
    current = {"gold.campaign_hourly": "new"}

    def stale() -> dict:
        judged = code_versions.stale_periods(code_versions.written(lakehouse), current)
        return {p.period_start: p.reason for p in judged.get("gold.campaign_hourly", [])}

    before = stale()
    assert sorted(before) == [p2, p3]
    records = maintain(["--lakehouse-root", lakehouse.root, "--table", code_versions.RECORDS])

    kept = sorted(
        (r.period_start.hour, r.code_version, r.whole)
        for r in spark.read.format("delta").load(table.path).collect()
    )
    assert kept == [(1, "new", False), (2, "new", False), (2, "old", False), (3, "old", True)]
    assert stale() == before
    assert {r["operation"]: r for r in records}["trim"]["rows_deleted"] == 5


def test_pending_late_session_events_outlive_the_retention(spark, lakehouse):
    """A late event waits for the run that reconciles it; once reconciled it is kept a month."""
    old = datetime.now(UTC).replace(microsecond=0) - timedelta(days=40)

    def late(event_id: str, reconciled: bool) -> dict:
        return {
            "event_id": event_id,
            "user_id": "u1",
            "event_time": old,
            "batch_id": 1,
            "watermark": old,
            "touches_session_id": None,
            "recorded_at": old,
            "reconciled_at": old if reconciled else None,
            "reconciled_by": "run-1" if reconciled else None,
        }

    table = lakehouse.table("ops.late_session_events")
    ensure_table(spark, table)
    append_records([late("settled", True), late("pending", False)], table)

    maintain(["--lakehouse-root", lakehouse.root, "--table", "ops.late_session_events"])

    kept = [r.event_id for r in spark.read.format("delta").load(table.path).collect()]
    assert kept == ["pending"]
