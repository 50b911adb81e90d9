"""Quarantined lines let in after all: by a backfill, or by the next run after a dimension change.

A line quarantined for an ad the dimension did not have yet is valid once the dimension has it.
A batch recompute of its hours accepts it (:func:`lakehouse.flows.merge.recompute`); without
one, the first incremental run after the dimension changed replays the open quarantine against
it (:func:`replay_quarantine`). Either way the line's quarantine row is marked resolved, so it is
never in both tables.
"""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse import delta_log
from lakehouse.config import Table
from lakehouse.files import lake_path, write_atomic
from lakehouse.flows.keys import accepted
from lakehouse.periods import Periods
from lakehouse.runtime import log
from lakehouse.sinks import mark_resolved, merge_new_rows, with_conflict_retries


def open_quarantined_lines(
    spark: SparkSession, lines: DataFrame, quarantine: Table
) -> DataFrame | None:
    """Those of ``lines`` (upstream rows) that the quarantine holds unresolved, found by their
    raw line; None when it holds none. Only the ingest dates of those lines are read."""
    unresolved = spark.read.format("delta").load(quarantine.path).filter("resolved_at IS NULL")
    dates = [row.ingest_date for row in unresolved.select("ingest_date").distinct().collect()]
    if not dates:
        return None
    line = ["ingest_date", "source_file", "raw_line"]
    return lines.filter(F.col("ingest_date").isin(dates)).join(
        unresolved.select(*line).distinct(), line, "left_semi"
    )


def replay_record(checkpoint: str):
    """Where the upstream versions the quarantine was last replayed against are recorded: beside
    the checkpoint folder (``gen=N.quarantine_replay.json``)."""
    path = lake_path(checkpoint)
    return path.with_name(path.name + ".quarantine_replay.json")


def replay_quarantine(spark: SparkSession, table: Table, generation: int) -> dict:
    """After an upstream the stream joins (the dimension) changed: the quarantine's open lines
    classified again; the ones now valid merged in and marked resolved, as a backfill would.

    A line quarantined for an ad the dimension did not have yet is then accepted by the next
    hourly run, with or without new events, and the downstream streams read its row as an
    append. Nothing happens while the upstreams' versions equal the record's (an hourly run
    reads two small files); the first run of a checkpoint only writes the record (lines
    quarantined before it, by an earlier generation, wait for the next change or a backfill).
    Rerunning after a crash is safe: the merge inserts only keys the table lacks, and a resolved
    line is not marked again.
    """
    streamed, *static = table.upstream_tables()
    if not static:
        return {}
    versions = {upstream.name: delta_log.latest_version(upstream.path) for upstream in static}
    record = replay_record(table.checkpoint(generation))
    if not record.exists():  # the first run: this run's stream classified against these versions
        write_atomic(record, json.dumps(versions))
        return {}
    if json.loads(record.read_text()) == versions:
        return {}
    quarantine = table.side("quarantine")
    lines = open_quarantined_lines(
        spark, spark.read.format("delta").load(streamed.path), quarantine
    )
    replayed = {"lines": 0, "periods": []}
    if lines is not None:
        inputs = [spark.read.format("delta").load(upstream.path) for upstream in static]
        valid = table.spec.transform(lines, *inputs).filter(F.col("reason").isNull()).persist()
        try:
            hour = F.date_trunc("hour", "event_time").alias("hour")
            touched = {row.hour for row in valid.select(hour).distinct().collect()}
            if touched:
                hours = Periods.of(touched)
                with_conflict_retries(
                    lambda: merge_new_rows(
                        spark,
                        accepted(valid, table.spec),
                        table,
                        table.spec.key,
                        hours.widened(table.spec.key_window_hours),
                        None,
                        None,
                    ),
                    f"{table.name} quarantine replay",
                )
                replayed["lines"] = with_conflict_retries(
                    lambda: mark_resolved(spark, valid, quarantine, "replay after upstream change"),
                    f"{quarantine.name} replay",
                )
                replayed["periods"] = hours.isoformats()
        finally:
            valid.unpersist()
    write_atomic(record, json.dumps(versions))
    log.info(
        "%s: %s changed; %d quarantined line(s) now accepted, marked resolved",
        table.name,
        ", ".join(f"{name} (version {v})" for name, v in versions.items()),
        replayed["lines"],
    )
    return {"quarantine_replay": replayed}
