"""The streaming protocols as library code: one micro-batch of each flow, called directly on real Delta tables."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from helpers import START, table
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from lakehouse import catalog
from lakehouse.flows.containment import failing_keys
from lakehouse.flows.merge import MergeBatch, one_row_per_key
from lakehouse.flows.recompute import event_hours, new_hours
from lakehouse.periods import Grain, Periods
from lakehouse.sinks import ensure_table
from lakehouse_tools.generator import campaign_dimension

SILVER = catalog.get("silver.ad_events")


def bronze_rows(spark, *lines: str):
    at = datetime(2026, 11, 20, 10, 30)
    rows = [(line, "file:/landing/a.jsonl", at) for line in lines]
    frame = spark.createDataFrame(rows, "value string, source_file string, ingested_at timestamp")
    return catalog.get("bronze.ad_events").transform(frame)


def event(event_id: str, ad_id: str) -> str:
    return (
        f'{{"event_id": "{event_id}", "user_id": "u", "page_id": "p", "ad_id": "{ad_id}", "ad_type": "banner", '
        f'"event_type": "view", "event_time": "1795168800000", "ip_address": "10.0.0.1"}}'
    )


def silver_tables_with_one_ad(spark, lakehouse) -> str:
    """A dimension of one ad and silver's empty tables; the ad."""
    (ad, campaign), *_ = campaign_dimension(3)
    spark.createDataFrame([(ad, campaign)], "ad_id string, campaign_id string").write.format(
        "delta"
    ).save(lakehouse.table("dims.campaigns").path)
    for declared in catalog.written_by_task(SILVER):
        ensure_table(spark, lakehouse.table(declared.name))
    return ad


def test_a_merge_batch_inserts_quarantines_and_accounts_once_even_when_replayed(spark, lakehouse):
    ad = silver_tables_with_one_ad(spark, lakehouse)
    on_batch = MergeBatch(SILVER.at(lakehouse), generation=0)
    batch = bronze_rows(spark, event("e-1", ad), event("e-1", ad), event("e-2", ad), "not json")

    notes = [
        on_batch(batch, 0),
        on_batch(batch, 0),  # Spark replays the last batch after a crash: nothing is written twice
        on_batch(bronze_rows(spark, event("e-2", ad)), 1),  # a duplicate of an earlier batch
    ]

    silver = table(spark, lakehouse, "silver.ad_events")
    assert sorted(r.event_id for r in silver.collect()) == ["e-1", "e-2"]
    assert [
        (r.reason, r.raw_line)
        for r in table(spark, lakehouse, "silver.quarantine_ad_events").collect()
    ] == [("malformed_json", "not json")]
    metrics = table(spark, lakehouse, "ops.silver_batch_metrics").orderBy("batch_id").collect()
    assert [
        (
            m.batch_id,
            m.lines,
            m.valid_lines,
            m.duplicates_in_batch,
            m.duplicates_of_earlier_batches,
            m.inserted,
            dict(m.quarantined_by_reason),
        )
        for m in metrics
    ] == [(0, 4, 3, 1, 0, 2, {"malformed_json": 1}), (1, 1, 1, 0, 1, 0, {})]
    assert [note and note["batch_id"] for note in notes] == [0, None, 1], "the replay was skipped"


def test_one_row_per_key_keeps_each_keys_first_row_by_the_given_order_whole(spark):
    rows = spark.createDataFrame(
        [
            ("a", 1, "x"),
            ("b", 2, "x"),
            ("b", 2, "x"),
            ("c", 3, "y"),
            ("c", 2, "z"),
            ("c", 3, "x"),
            (None, 6, "x"),
            (None, 5, "x"),
            ("d", 7, "x"),
            ("e", 1, "y"),  # a tie in the order: then by the other columns
            ("e", 1, "x"),
        ],
        "key string, arrived int, payload string",
    )
    kept = one_row_per_key(rows, "key", ("arrived",))
    # null is one key, as in dropDuplicates
    expected = [("a", 1, "x"), ("b", 2, "x"), ("c", 2, "z"), (None, 5, "x"), ("d", 7, "x")]
    assertDataFrameEqual(kept, spark.createDataFrame([*expected, ("e", 1, "x")], rows.schema))


def test_touched_hours_are_the_event_hours_of_the_new_rows(spark):
    rows = spark.createDataFrame(
        [
            (datetime(2026, 11, 20, 0, 59, 59),),
            (datetime(2026, 11, 20, 1, 0),),
            (datetime(2026, 11, 20, 1, 30),),
        ],
        "event_time timestamp",
    )
    hours = new_hours(event_hours(rows, SILVER))
    assert len(hours) == 2
    assert Periods.of(hours, Grain.HOUR) == Periods.between(START, START.replace(hour=2))
    assert Periods.of(hours, Grain.DAY) == Periods.of([START], Grain.DAY)
    assert new_hours(event_hours(rows.filter(F.lit(False)), SILVER)) == []


def test_a_batch_that_fails_on_its_data_quarantines_the_failing_lines_and_keeps_the_rest(
    spark, lakehouse
):
    """The safety net for a line no one foresaw: here a transform that casts a marked line under ANSI mode."""
    ad = silver_tables_with_one_ad(spark, lakehouse)

    def fragile(lines, campaigns):  # fails on any line holding "boom", as an unforeseen cast would
        line = F.col("raw_line")
        fragile_line = F.when(
            line.contains("boom"), F.concat(line, line.cast("int").cast("string"))
        ).otherwise(line)
        return SILVER.transform(lines.withColumn("raw_line", fragile_line), campaigns)

    fragile_silver = dataclasses.replace(
        SILVER.at(lakehouse), spec=dataclasses.replace(SILVER, transform=fragile)
    )
    on_batch = MergeBatch(fragile_silver, generation=0)
    poison = [event(f"boom-{n}", ad) for n in range(3)]
    lines = [
        event("e-1", ad),
        poison[0],
        event("e-2", ad),
        "not json",
        poison[1],
        event("e-1", ad),
        poison[2],
    ]
    note = on_batch(bronze_rows(spark, *lines), 0)

    assert sorted(r.event_id for r in table(spark, lakehouse, "silver.ad_events").collect()) == [
        "e-1",
        "e-2",
    ]
    quarantine = table(spark, lakehouse, "silver.quarantine_ad_events").collect()
    assert sorted((r.reason, r.raw_line, r.source_file) for r in quarantine) == sorted(
        [("malformed_json", "not json", "file:/landing/a.jsonl")]
        + [("processing_error", line, "file:/landing/a.jsonl") for line in poison]
    )
    assert {
        r.reason_detail.split("]")[0] for r in quarantine if r.reason == "processing_error"
    } == {"[CAST_INVALID_INPUT"}
    assert (
        note["lines"],
        note["valid_lines"],
        note["inserted"],
        note["quarantined_by_reason"],
    ) == (7, 3, 2, {"malformed_json": 1, "processing_error": 3})


def test_bisection_finds_exactly_the_lines_that_fail_alone(spark):
    keyed = spark.createDataFrame([(n,) for n in range(-10, 10)], "_containment_key long")
    failing = {-10, -3, 0, 9}

    def transform(rows):
        return rows.withColumn(
            "x", F.when(F.col("_containment_key").isin(*failing), F.lit("x").cast("int"))
        )

    assert set(failing_keys(keyed, transform)) == failing
    assert failing_keys(keyed.filter(~F.col("_containment_key").isin(*failing)), transform) == {}


def test_a_replace_figure_the_commit_does_not_record_is_left_out_not_none():
    from lakehouse.flows.recompute import figures_of

    assert figures_of({"rows_written": 3, "rows_deleted": None, "version": 4}) == (
        "3 row(s) written, version 4"
    )
    assert figures_of({"rows_written": None, "rows_deleted": None, "version": None}) == (
        "no figure recorded"
    )
