"""Every declared data-quality rule is SQL its table can evaluate (a typo would otherwise fail a run)."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql import functions as F

from lakehouse import catalog, expectations
from lakehouse.config import Lakehouse

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
