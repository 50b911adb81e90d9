"""What a task's summary turns into: the asset events (tables written, rows, event periods) and its log lines.

The summaries are the shapes the jobs return (lakehouse.runner); a real run's are checked end to
end in tests/e2e/test_hourly_dag.py.
"""

from __future__ import annotations

from lakehouse import catalog
from lakehouse_airflow.assets import written
from lakehouse_airflow.summaries import summary_lines

H0, H1, H2 = (f"2026-11-20T0{h}:00:00+00:00" for h in range(3))


def test_a_run_that_read_nothing_writes_no_table():
    nothing = {"table": "bronze.ad_events", "micro_batches": 0, "input_rows": 0, "batches": []}
    assert (
        written(catalog.task("bronze_ad_events"), {**nothing, "not_started": "no new file"}) == {}
    )
    assert written(catalog.task("dim_campaigns"), {"rows_written": 0, "not_started": "same"}) == {}
    silver = {**nothing, "table": "silver.ad_events", "grain": "hour", "periods": []}
    assert written(catalog.task("silver_ad_events"), silver) == {}
    lines = summary_lines("bronze_ad_events", {**nothing, "not_started": "no new file"}, {}, 0.4)
    assert lines == ["bronze.ad_events: nothing new (no new file)", "  wrote nothing", "  0.4 s"]


def test_silver_writes_its_rows_quarantine_metrics_and_records_with_the_hours():
    note = {
        "batch_id": 3,
        "lines": 10,
        "valid_lines": 8,
        "duplicates_in_batch": 1,
        "duplicates_of_earlier_batches": None,  # the MERGE's record is gone: no figure
        "inserted": 7,
        "quarantined": 2,
        "quarantined_by_reason": {"bad_json": 2},
        "periods": [H0, H1],
    }
    summary = {
        "table": "silver.ad_events",
        "micro_batches": 1,
        "input_rows": 10,
        "batches": [note],
        "grain": "hour",
        "periods": [H0, H1],  # the runner's: every batch's hours
        "expectations": {"checked": 4, "failed_warn": []},
    }
    incremental = {"grain": "hour", "periods": [H0, H1], "mode": "incremental"}
    assert written(catalog.task("silver_ad_events"), summary) == {
        "silver.ad_events": {"rows": 7, **incremental},
        "silver.quarantine_ad_events": {"rows": 2, **incremental},
        "ops.silver_batch_metrics": {"rows": 1, **incremental},
        "ops.query_progress": {"rows": 1, **incremental},
        "ops.expectation_results": {"rows": 4, **incremental},
        "ops.code_versions": {"rows": 2, **incremental},  # a record per hour written
    }
    lines = summary_lines(
        "silver_ad_events", summary, written(catalog.task("silver_ad_events"), summary), 12.0
    )
    assert lines[0] == (
        "silver.ad_events: 10 row(s) in, 1 micro-batch(es); 8 valid, 1 duplicate(s), 7 inserted, "
        "2 quarantined (bad_json 2); 4 rule check(s)"
    )
    assert (
        lines[1]
        == "  wrote silver.ad_events: 7 row(s); event hours 2026-11-20T00:00Z..01:00Z (2 hours)"
    )
    assert lines[-1] == "  12.0 s" and not any("None" in line for line in lines)


def test_a_backfill_replaces_its_hours_even_when_it_counts_no_rows():
    batch = {"mode": "batch", "grain": "hour", "periods": [H0, H1, H2]}
    versions = {"ops.code_versions": {"rows": 3, **batch}}
    # A query of several tables: each table's own summary, its periods in its grain.
    day = {"mode": "batch", "grain": "day", "periods": [H0]}
    gold = {
        "table": "gold.ad_hourly",
        "mode": "batch",
        "tables": {
            "gold.ad_type_hourly": {"rows_written": 5, "rows_deleted": 4, **batch},
            "gold.campaign_daily": {"rows_written": 0, "rows_deleted": 2, **day},
        },
    }
    assert written(catalog.task("gold_aggregates"), gold) == {
        "gold.ad_type_hourly": {"rows": 5, "rows_replaced": 4, **batch},
        "gold.campaign_daily": {"rows": 0, "rows_replaced": 2, **day},
        # a record per period of each table: the hours', then the day's
        "ops.code_versions": {"rows": 4, **batch},
    }
    silver = {"table": "silver.ad_events", "mode": "batch", "quarantine_resolved": 0}
    assert written(catalog.task("silver_ad_events"), {**silver, **batch}) == {
        "silver.ad_events": batch,  # replaced, but the job reports no row count
        **versions,
    }
    # A batch run's periods are its interval's (the runner's), in the table's grain.
    sessions = {"table": "gold.user_sessions", "mode": "batch", "sessions": 0, **batch}
    assert written(catalog.task("gold_user_sessions"), sessions) == {
        "gold.user_sessions": {"rows": 0, **batch},
        **versions,
    }
