"""Every declared data-quality rule is SQL its table can evaluate (a typo would otherwise fail a run)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql import functions as F

from lakehouse import catalog, delta_log, expectations
from lakehouse.config import Lakehouse
from lakehouse.periods import Periods

RULES = [(entry, rule) for entry in catalog.tables() for rule in entry.expectations]


@pytest.mark.parametrize(
    "entry, rule", RULES, ids=[f"{entry.name}: {rule.rule}" for entry, rule in RULES]
)
def test_every_declared_rule_measures_its_table(spark, entry, rule):
    empty = spark.createDataFrame([], entry.spark_schema())
    grouped = F.expr(entry.period_sql) if rule.per == "hour" else F.col("batch_id")
    assert empty.groupBy(grouped).agg(F.expr(rule.measure).cast("double")).collect() == []


def test_the_pipeline_declares_gating_and_warning_rules():
    # A subset, not the whole list: a new table's rules need no edit here.
    assert {(entry.name, rule.on_failure, rule.per) for entry, rule in RULES} >= {
        ("silver.ad_events", "fail", "hour"),
        ("ops.silver_batch_metrics", "warn", "batch"),
        ("gold.campaign_hourly", "fail", "hour"),
    }


def test_an_hour_stays_failing_until_its_newest_check_of_a_gating_rule_passes(tmp_path):
    lakehouse, silver = Lakehouse(str(tmp_path)), catalog.get("silver.ad_events")
    assert expectations.still_failing(lakehouse, silver) == []  # no results table yet
    rule = next(rule.rule for rule in silver.expectations if rule.on_failure == "fail")

    def at(hour: int, minute: int = 0) -> datetime:
        return datetime(2026, 11, 20, hour, minute, tzinfo=UTC)

    checks = [  # (checked_at, table, rule, hour, passed)
        (at(1, 5), silver.name, rule, at(0), False),
        (at(2, 5), silver.name, rule, at(0), True),  # fixed
        (at(2, 5), silver.name, rule, at(1), True),
        (at(3, 5), silver.name, rule, at(1), False),  # broke
        (at(3, 5), silver.name, "a rule no longer declared", at(2), False),
        (at(3, 5), "gold.campaign_hourly", rule, at(3), False),  # another table's
    ]
    columns = ["checked_at", "table_name", "rule", "hour_start", "passed"]
    results = pa.table({c: [check[i] for check in checks] for i, c in enumerate(columns)})
    write_deltalake(lakehouse.table(expectations.RESULTS_TABLE).path, results)
    assert expectations.still_failing(lakehouse, silver) == [at(1)]


STATS_RULES = [(entry, rule) for entry, rule in RULES if rule.from_stats]
VALUE_OF_TYPE = {"STRING": "x", "BIGINT": 2, "INT": 2, "DOUBLE": 0.5}


def rows_of_period(entry, start: datetime, values: list) -> list[dict]:
    """Rows of ``entry`` in the period starting at ``start``, the rule's columns set to each of ``values``."""
    _, columns = next(rule.from_stats for rule in entry.expectations if rule.from_stats)
    base = {c.name: VALUE_OF_TYPE.get(c.type) for c in entry.columns}
    naive = start.replace(tzinfo=None)
    base.update(event_date=naive.date(), hour_start=naive, event_hour=naive.hour)
    base.update(event_time=naive.replace(minute=5), ingested_at=naive)
    return [
        {
            c: v
            for c, v in {**base, **dict.fromkeys(columns, value)}.items()
            if c in entry.column_names
        }
        for value in values
    ]


@pytest.mark.parametrize(
    "entry, rule", STATS_RULES, ids=[f"{entry.name}: {rule.rule}" for entry, rule in STATS_RULES]
)
def test_a_rule_answered_from_the_delta_log_gives_sparks_results_or_none(
    spark, tmp_path, entry, rule
):
    lakehouse = Lakehouse(str(tmp_path))
    path = lakehouse.table(entry.name).path
    step = entry.grain.step
    first = datetime(2026, 11, 20, tzinfo=UTC)
    periods = [first + i * step for i in range(3)]
    breaks = None if rule.from_stats[0] == "nulls" else -1  # what breaks the rule in a row
    appends = [  # two files in the first period, one breaking the rule; the third is not asked
        rows_of_period(entry, periods[0], [1, 3]),
        rows_of_period(entry, periods[0], [breaks]),
        rows_of_period(entry, periods[1], [0, 5]),
        rows_of_period(entry, periods[2], [breaks]),
    ]
    for rows in appends:
        spark.createDataFrame(rows, entry.spark_schema()).coalesce(1).write.format("delta").mode(
            "append"
        ).partitionBy(*entry.partition_by).save(path)
        # A checkpoint every 2 commits: the files come from a checkpoint and the commits after it.
        spark.sql(
            f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '2')"
        )
    asked = Periods.of(periods[:2], entry.grain)
    assert list((Path(path) / "_delta_log").glob("*.checkpoint.parquet"))

    def by_spark() -> list[dict]:
        measured = expectations._measure_hours(spark, lakehouse, entry, [rule], asked)
        return sorted(measured, key=lambda r: r["hour_start"])

    def from_log():
        answered = expectations.measured_from_stats(lakehouse, entry, [rule], asked)
        return answered and [  # Spark's hours are naive UTC
            {**r, "hour_start": r["hour_start"].replace(tzinfo=None)} for r in answered
        ]

    if breaks is None:  # null counts add up: the same results, the first period failing
        assert from_log() == by_spark()
        assert [r["observed"] for r in by_spark()] == [1.0, 0.0]
    else:  # a minimum below 0 cannot say how many rows: Spark measures
        assert from_log() is None
        spark.sql(f"DELETE FROM delta.`{path}` WHERE {rule.measure[len('count_if(') : -1]}")
        assert from_log() == by_spark()
        assert [r["observed"] for r in by_spark()] == [0.0, 0.0]
    # A deletion vector (one row of a file of two deleted): the file's counts include the deleted
    # row, so the log cannot tell.
    column = rule.from_stats[1][0]
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.sql(f"DELETE FROM delta.`{path}` WHERE CAST({column} AS STRING) = '3'")
    assert any(add.get("deletionVector") for add in delta_log.live_files(path))
    assert expectations.measured_from_stats(lakehouse, entry, [rule], asked) is None
