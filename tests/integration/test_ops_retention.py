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
