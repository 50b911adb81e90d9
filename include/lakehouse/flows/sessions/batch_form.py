"""The batch form: sessions recomputed from silver (with the margin sessionization needs) and replaced."""

from __future__ import annotations

from datetime import datetime, timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse.catalog import TableSpec
from lakehouse.config import Table
from lakehouse.errors import ConfigError
from lakehouse.flows.sessions.processor import batch_sessions, table_rows
from lakehouse.sinks import (
    replace_where,
    with_conflict_retries,
)
from lakehouse.tables.gold_user_sessions import (
    SESSION_GAP_MS,
)

INITIAL_MARGIN_MS = 2 * 3_600_000
MAX_MARGIN_MS = 32 * 24 * 3_600_000


def _silver_events(
    spark: SparkSession,
    silver: Table,
    table: TableSpec,
    from_ms: int,
    to_ms: int | None,
    users: DataFrame | None,
) -> DataFrame:
    rows = spark.read.format("delta").load(silver.path)
    after = utc_datetime(from_ms)
    rows = rows.where(F.col("event_date") >= F.lit(after.date())).where(
        F.unix_millis("event_time") >= from_ms
    )
    if to_ms is not None:
        before = utc_datetime(to_ms)
        rows = rows.where(F.col("event_date") <= F.lit(before.date())).where(
            F.unix_millis("event_time") < to_ms
        )
    if users is not None:  # a semi join: broadcast by the planner when the users are few
        rows = rows.join(users, "user_id", "left_semi")
    return table.transform(rows)


def recomputed_sessions(
    spark: SparkSession,
    silver: Table,
    table: TableSpec,
    watermark_ms: int,
    start_ms: int,
    end_ms: int | None = None,
    users: DataFrame | None = None,
) -> DataFrame:
    """Every session (closed or open as of ``watermark_ms``) overlapping [start_ms, end_ms), whole.

    ``users`` (a ``user_id`` column): only theirs.

    Silver is read with a margin around the interval, doubled while a session could reach past
    what was read (a session is whole when no event lies within the gap before its first or after
    its last). Returns the sessions (``OUTPUT_SCHEMA``), cached: the caller unpersists them.
    """
    margin = INITIAL_MARGIN_MS
    while True:
        read_from, read_to = start_ms - margin, (end_ms + margin if end_ms is not None else None)
        events = _silver_events(spark, silver, table, read_from, read_to, users)
        sessions = batch_sessions(events, watermark_ms)
        overlapping = sessions.where(F.col("end_ms") >= start_ms)
        if end_ms is not None:
            overlapping = overlapping.where(F.col("start_ms") < end_ms)
        overlapping = overlapping.persist()
        reach = overlapping.agg(
            F.min("start_ms").alias("first"), F.max("end_ms").alias("last")
        ).first()
        first, last = reach["first"], reach["last"]
        whole = first is None or (
            first - SESSION_GAP_MS >= read_from
            and (read_to is None or last + SESSION_GAP_MS < read_to)
        )
        if whole:
            return overlapping
        overlapping.unpersist()
        if margin >= MAX_MARGIN_MS:
            raise ConfigError(
                f"{table.name}: a session reaches more than {MAX_MARGIN_MS // 86_400_000} days beyond "
                f"{iso_instant(start_ms)}..{iso_instant(end_ms)}; a user active without a {SESSION_GAP_MS // 60_000}-minute "
                "pause for that long is a producer bug. Check silver for that user."
            )
        margin *= 2


def utc_datetime(millis: int) -> datetime:
    """Epoch milliseconds as a naive UTC datetime, exactly (no float rounding)."""
    return datetime(1970, 1, 1) + timedelta(milliseconds=millis)


def iso_instant(millis: int | None) -> str:
    return "now" if millis is None else f"{utc_datetime(millis):%Y-%m-%dT%H:%M:%SZ}"


def _ts(millis: int) -> str:
    return f"TIMESTAMP'{utc_datetime(millis):%Y-%m-%d %H:%M:%S.%f}'"


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _closed_by_then(watermark_ms: int) -> str:
    """Session.closed_at, as SQL: a stored session closed as of ``watermark_ms``."""
    return f"session_end <= {_ts(watermark_ms - SESSION_GAP_MS)}"


def replace_sessions(
    spark: SparkSession,
    target: Table,
    table: TableSpec,
    sessions: DataFrame,
    watermark_ms: int,
    start_ms: int,
    end_ms: int | None,
) -> None:
    """Replace the target's sessions overlapping [start_ms, end_ms) with the closed ones of ``sessions``.

    ``sessions`` are every recomputed session overlapping the interval, closed or open as of
    ``watermark_ms``. One that reaches past its start or end also replaces the rows of its user
    within its own extent: a stored session that it now contains (merged by an event since) would
    otherwise stay beside it. Only stored sessions closed as of ``watermark_ms`` are replaced: one
    that the stream closed since (beside a backfill that read an older watermark) is newer than
    this recomputation, which saw it open and would delete it without writing it back.
    """
    overlapping = f"session_end >= {_ts(start_ms)}" + (
        f" AND session_start < {_ts(end_ms)}" if end_ms is not None else ""
    )
    reaching_out = F.col("start_ms") < start_ms
    if end_ms is not None:
        reaching_out = reaching_out | (F.col("end_ms") >= end_ms)
    extents = [
        f"(user_id = {_quoted(row.user_id)} AND session_end >= {_ts(row.start_ms)} AND session_start <= {_ts(row.end_ms)})"
        for row in sessions.where(reaching_out).select("user_id", "start_ms", "end_ms").collect()
    ]
    predicate = (
        f"({' OR '.join([f'({overlapping})', *extents])}) AND {_closed_by_then(watermark_ms)}"
    )
    closed = table_rows(sessions.where(F.col("kind") == "session"))
    with_conflict_retries(
        lambda: replace_where(closed, target, predicate), f"{table.name} sessions"
    )


def replace_users_sessions(
    spark: SparkSession,
    target: Table,
    table: TableSpec,
    sessions: DataFrame,
    users: DataFrame,
    watermark_ms: int,
    start_ms: int,
) -> None:
    """:func:`replace_sessions` for ``users``' sessions ending at or after ``start_ms``, by one MERGE.

    ``users`` is a DataFrame (a ``user_id`` column) of any size: the rows to replace are found by
    joins, not a predicate listing them. The same rows as :func:`replace_sessions` would replace:
    the users' stored sessions closed as of ``watermark_ms`` that end at or after ``start_ms`` or
    overlap a recomputed session reaching before it; those the recomputation does not hold are
    deleted, the others updated or inserted.
    """
    closed = table_rows(sessions.where(F.col("kind") == "session"))
    reach = sessions.agg(F.min("start_ms").alias("first")).first()["first"]
    reach_from = min(start_ms, reach) if reach is not None else start_ms
    stored = (
        spark.read.format("delta")
        .load(target.path)
        .where(f"session_end >= {_ts(reach_from)} AND {_closed_by_then(watermark_ms)}")
        .join(users, "user_id", "left_semi")
        .select("session_id", "user_id", "session_start", "session_end")
    )
    extents = sessions.where(F.col("start_ms") < start_ms).select(
        F.col("user_id").alias("x_user"),
        F.timestamp_millis("start_ms").alias("x_start"),
        F.timestamp_millis("end_ms").alias("x_end"),
    )
    in_extent = stored.join(
        extents,
        (F.col("user_id") == F.col("x_user"))
        & (F.col("session_end") >= F.col("x_start"))
        & (F.col("session_start") <= F.col("x_end")),
        "left_semi",
    )
    replaced = (
        stored.where(f"session_end >= {_ts(start_ms)}")
        .unionByName(in_extent)
        .select("session_id")
        .distinct()
    )
    stale = replaced.join(closed.select("session_id"), "session_id", "left_anti")
    columns = closed.columns
    source = closed.withColumn("stale", F.lit(False)).unionByName(
        stale.select(
            *[
                F.col(c)
                if c == "session_id"
                else F.lit(None).cast(closed.schema[c].dataType).alias(c)
                for c in columns
            ],
            F.lit(True).alias("stale"),
        )
    )
    updates = ", ".join(f"t.{c} = s.{c}" for c in columns)
    merge = (
        f"MERGE INTO delta.`{target.path}` AS t USING {{source}} AS s "
        # The reach bound lets Delta skip files by their statistics; no row it leaves out has a
        # recomputed session's id (a session ends after its start, which is at or after it).
        f"ON t.session_id = s.session_id AND t.session_end >= {_ts(reach_from)} "
        "WHEN MATCHED AND s.stale THEN DELETE "
        f"WHEN MATCHED AND t.{_closed_by_then(watermark_ms)} THEN UPDATE SET {updates} "
        f"WHEN NOT MATCHED AND NOT s.stale THEN INSERT ({', '.join(columns)}) "
        f"VALUES ({', '.join(f's.{c}' for c in columns)})"
    )
    with_conflict_retries(
        lambda: spark.sql(merge, source=source).collect(), f"{table.name} sessions of late users"
    )
