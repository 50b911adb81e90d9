"""A silver batch's metrics row is written exactly once, even when the driver dies after the data write.

The metrics append carries its own Delta transaction id, so a replay may write it; a replay whose
MERGE Delta skipped (committed before the kill) writes the row with the MERGE's own figures.
"""

from __future__ import annotations

import signal
from collections import Counter
from datetime import timedelta
from pathlib import Path

from helpers import START, oracle, run_job, table

from lakehouse_tools.fault_harness.attempt import Attempt, BatchClock, run_attempt
from lakehouse_tools.generator import write_campaigns, write_hours


def metrics_rows(spark, lakehouse) -> list:
    return table(spark, lakehouse, "ops.silver_batch_metrics").orderBy("batch_id").collect()


def test_a_kill_after_the_merge_or_the_quarantine_still_leaves_one_metrics_row_per_batch(
    spark, lakehouse, tmp_path
):
    write_campaigns(lakehouse, seed=71)
    run_job("dim_campaigns", lakehouse)
    checkpoint = Path(lakehouse.table("silver.ad_events").checkpoint())
    for batch, point in enumerate(("silver.after_merge", "silver.after_quarantine")):
        write_hours(lakehouse, START + timedelta(hours=batch), 1, events_per_second=0.05, seed=71)
        run_job("bronze_ad_events", lakehouse)

        killed = run_attempt(
            Attempt("silver_ad_events", 1, point, batch=batch),
            lakehouse,
            tmp_path / f"killed-{batch}.log",
            BatchClock(),
        )
        assert killed.killed and killed.returncode == -signal.SIGKILL, Path(killed.log).read_text()[
            -3000:
        ]
        assert killed.phase.startswith(f"batch {batch}: silver.ad_events"), killed.phase
        assert not (checkpoint / "commits" / str(batch)).exists()
        assert [row.batch_id for row in metrics_rows(spark, lakehouse)] == list(range(batch)), (
            "no row yet"
        )

        retry = run_job("silver_ad_events", lakehouse)  # the retry, in this process
        assert [m["batch_id"] for m in retry["batches"]] == [batch], retry
        assert (checkpoint / "commits" / str(batch)).exists()

    expected = oracle(lakehouse)
    rows = metrics_rows(spark, lakehouse)
    assert [(row.generation, row.batch_id) for row in rows] == [(0, 0), (0, 1)], (
        "one row per batch, once"
    )
    assert sum(row.lines for row in rows) == expected.lines
    assert sum(row.inserted for row in rows) == len(expected.events)
    assert (
        sum(row.duplicates_in_batch + row.duplicates_of_earlier_batches for row in rows)
        == expected.duplicates
    )
    assert (
        sum((Counter(dict(row.quarantined_by_reason)) for row in rows), Counter())
        == expected.quarantined
    )
    assert sum(row.quarantined for row in rows) == sum(expected.quarantined.values())
    ids = [
        row.event_id
        for row in table(spark, lakehouse, "silver.ad_events").select("event_id").collect()
    ]
    assert sorted(ids) == sorted(expected.events)
    reasons = (
        table(spark, lakehouse, "silver.quarantine_ad_events").groupBy("reason").count().collect()
    )
    assert {row.reason: row["count"] for row in reasons} == dict(expected.quarantined)
