"""Every declared data-quality rule is SQL its table can evaluate (a typo would otherwise fail a run)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from lakehouse import catalog

RULES = [(entry, rule) for entry in catalog.tables() for rule in entry.expectations]


@pytest.mark.parametrize("entry, rule", RULES, ids=[f"{entry.name}: {rule.rule}" for entry, rule in RULES])
def test_every_declared_rule_measures_its_table(spark, entry, rule):
    empty = spark.createDataFrame([], entry.spark_schema())
    grouped = F.expr(entry.hour_sql) if rule.per == "hour" else F.col("batch_id")
    assert empty.groupBy(grouped).agg(F.expr(rule.measure).cast("double")).collect() == []


def test_the_pipeline_declares_gating_and_warning_rules():
    assert {(entry.name, rule.on_failure, rule.per) for entry, rule in RULES} == {
        ("silver.ad_events", "fail", "hour"),
        ("ops.silver_batch_metrics", "warn", "batch"),
        ("gold.campaign_hourly", "fail", "hour"),
    }
