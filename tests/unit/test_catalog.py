"""The table catalog: Spark-free, consistent, and refusing at import what would fail a run late."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lakehouse import catalog
from lakehouse.catalog import CatalogError, Column, TableSpec, Write, expect
from lakehouse.catalog_checks import check_declarations, upstream_first
from lakehouse.periods import Grain
from lakehouse.runtime.job_args import parse_job_args
from lakehouse_tools import oracle

GOLD_SCHEMA = "campaign_id STRING, hour_start TIMESTAMP, views BIGINT NOT NULL, event_date DATE"


def gold(name: str = "gold.test", **changes) -> TableSpec:
    fields = dict(
        name=name,
        schema=GOLD_SCHEMA,
        write=Write.REPLACE_PERIODS,
        task="gold_test",
        upstream=("silver.test",),
        partition_by=("event_date", "hour_start"),
        batch=True,
    )
    return TableSpec(**{**fields, **changes})


SILVER = TableSpec(
    name="silver.test",
    schema="event_id STRING, event_time TIMESTAMP, event_date DATE, event_hour INT",
    write=Write.MERGE_NEW,
    task="silver_test",
    source="events",
    partition_by=("event_date", "event_hour"),
    key="event_id",
    batch=True,
)


def check(*tables: TableSpec) -> list[str]:
    declared = {table.name: table for table in tables}
    check_declarations(declared)
    return upstream_first(declared)


def test_the_declared_catalog_loads_in_dependency_order():
    names = [table.name for table in catalog.tables()]
    for table in catalog.tables():
        for before in (*table.upstream, *([table.written_by] if table.written_by else [])):
            assert names.index(before) < names.index(table.name), (before, table.name)
    assert [t.task for t in catalog.tasks()][:2] == ["dim_campaigns", "bronze_ad_events"]
    assert catalog.task("silver_ad_events") is catalog.get("silver.ad_events")
    assert (
        catalog.side(catalog.get("silver.ad_events"), "quarantine").name
        == "silver.quarantine_ad_events"
    )


def test_the_catalog_imports_no_spark():
    # A fresh interpreter: the DAG reads the catalog at parse time.
    code = (
        "import json, sys; from lakehouse import catalog; catalog.tables(); "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'delta'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_every_gold_table_has_an_oracle_expectation():
    assert sorted(oracle.GOLD) == sorted(t.name for t in catalog.tables() if t.layer == "gold")


def test_columns_are_read_from_ddl():
    assert catalog.parse_columns("a STRING, b MAP<STRING, BIGINT>, c BIGINT NOT NULL") == (
        Column("a", "STRING"),
        Column("b", "MAP<STRING, BIGINT>"),
        Column("c", "BIGINT", nullable=False),
    )


def test_a_consistent_pair_passes():
    assert check(gold(), SILVER) == ["silver.test", "gold.test"]


def test_tables_share_a_task_only_as_one_query_s_period_replaced_tables():
    # one task, one query over silver's change: both replaced by period from the same upstream
    assert check(
        gold(), gold(name="gold.daily", grain=Grain.DAY, partition_by=("event_date",)), SILVER
    ) == [
        "silver.test",
        "gold.daily",
        "gold.test",
    ]
    with pytest.raises(
        CatalogError, match="Task gold_test is shared by gold.test, gold.stream_only"
    ):
        check(gold(), gold(name="gold.stream_only", batch=False), SILVER)
    other = TableSpec(**{**SILVER.__dict__, "name": "silver.other"})
    with pytest.raises(CatalogError, match="from the same upstream tables"):
        check(gold(), gold(name="gold.other", upstream=("silver.other",)), SILVER, other)


def test_a_batch_run_of_a_shared_task_may_name_its_tables_and_an_incremental_one_may_not(
    tmp_path, capsys
):
    tables = ("gold.test", "gold.daily")
    root = ("--lakehouse-root", str(tmp_path))
    batch = (*root, "--mode", "batch", "--start", "2026-11-20T00:00Z", "--end", "2026-11-20T01:00Z")
    assert parse_job_args("t", [*batch], tables=tables).tables == ()
    chosen = parse_job_args("t", [*batch, "--tables", "gold.daily"], tables=tables)
    assert chosen.tables == ("gold.daily",)
    for argv, message in (
        ([*batch, "--tables", "gold.nope"], "gold.nope not of this task"),
        ([*root, "--tables", "gold.daily"], "only applies to --mode batch"),
    ):
        with pytest.raises(SystemExit):
            parse_job_args("t", argv, tables=tables)
        assert message in capsys.readouterr().err
    # a task of one table takes no --tables
    with pytest.raises(SystemExit):
        parse_job_args("t", [*batch, "--tables", "gold.test"], tables=("gold.test",))


@pytest.mark.parametrize(
    "tables, message",
    [
        (
            (gold(upstream=("silver.nothing",)), SILVER),
            "upstream table 'silver.nothing' is not declared",
        ),
        (
            (
                gold(
                    schema="campaign_id STRING, views BIGINT, event_date DATE",
                    partition_by=("event_date",),
                ),
                SILVER,
            ),
            "have the column(s) ['event_date', 'hour_start'] that select whole hours",
        ),
        (
            (gold(partition_by=("campaign_id",)), SILVER),
            "must be partitioned by ['event_date', 'hour_start']",
        ),
        ((gold(), TableSpec(**{**SILVER.__dict__, "key": None})), "needs key=<column>"),
        ((gold(partition_by=("event_date", "nope")), SILVER), "['nope'] are not in its schema"),
        (
            (gold(write=Write.APPEND, partition_by=()), SILVER),
            "only tables addressed by event period",
        ),
        ((gold(name="platinum.test"), SILVER), "<layer>.<table>"),
        ((gold(schema=GOLD_SCHEMA + ", x VARIANT"), SILVER), "Unsupported column type 'VARIANT'"),
        ((gold(upstream=()), SILVER), "needs upstream tables or a source"),
        (
            (gold(expectations=(expect("r", "count(*)", "about 3"),)), SILVER),
            "holds='about 3' is not '<op> <number>'",
        ),
        (
            (gold(expectations=(expect("r", "count(*)", "= 0", on_failure="page"),)), SILVER),
            "on_failure is 'warn' or 'fail'",
        ),
        (
            (gold(expectations=(expect("r", "count(*)", "= 0", per="day"),)), SILVER),
            "per is 'hour' or 'batch'",
        ),
        (
            (
                gold(
                    expectations=(expect("r", "count(*)", "= 0", per="batch", on_failure="warn"),)
                ),
                SILVER,
            ),
            "needs a batch_id column",
        ),
        (
            (
                gold(
                    schema=GOLD_SCHEMA + ", batch_id BIGINT",
                    expectations=(expect("r", "count(*)", "= 0", per="batch"),),
                ),
                SILVER,
            ),
            "it can only warn",
        ),
        (
            (
                gold(
                    write=Write.APPEND,
                    partition_by=(),
                    batch=False,
                    expectations=(expect("r", "count(*)", "= 0"),),
                ),
                SILVER,
            ),
            "only tables replaced by period are written by the period",
        ),
        (
            (
                gold(
                    expectations=(expect("r", "count(*)", "= 0"), expect("r", "sum(views)", ">= 0"))
                ),
                SILVER,
            ),
            "two rules are named 'r'",
        ),
    ],
    ids=[
        "unknown-upstream",
        "no-hour-column",
        "wrong-partitioning",
        "merge-without-key",
        "unknown-partition-column",
        "batch-not-by-hour",
        "unknown-layer",
        "unknown-type",
        "no-input",
        "rule-bound",
        "rule-action",
        "rule-scope",
        "batch-rule-without-batch-id",
        "batch-rule-that-fails",
        "hour-rule-on-append",
        "rule-named-twice",
    ],
)
def test_inconsistent_declarations_fail_at_import_with_a_message(tables, message):
    with pytest.raises(
        CatalogError,
        match=message.replace("[", r"\[")
        .replace("]", r"\]")
        .replace("(", r"\(")
        .replace(")", r"\)"),
    ):
        check(*tables)


@pytest.mark.parametrize(
    "holds, observed, passes",
    [
        ("= 0", 0, True),
        ("= 0", 1, False),
        ("<= 0.05", 0.05, True),
        ("<= 0.05", 0.051, False),
        ("> 2", 2, False),
        (">= 2", 2, True),
        ("!= 0", 0, False),
        ("< 1", None, True),
    ],
)
def test_a_rule_compares_its_measure_with_its_bound(holds, observed, passes):
    assert expect("r", "count(*)", holds).passes(observed) is passes


def test_a_cycle_is_refused():
    first = gold("gold.first", upstream=("gold.second",))
    second = gold("gold.second", upstream=("gold.first",), task="gold_second")
    with pytest.raises(CatalogError, match="cycle: gold.first -> gold.second -> gold.first"):
        check(first, second)
