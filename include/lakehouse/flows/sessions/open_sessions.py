"""``gold.open_sessions``: the sessions still open in the query's state, as a table; and a look
into that state for debugging (``jobs/session_state.py``)."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse import catalog, checkpoint_log, delta_log
from lakehouse.catalog import Write
from lakehouse.config import Lakehouse, Table
from lakehouse.errors import ConfigError
from lakehouse.files import lake_path
from lakehouse.flows.sessions.batch_form import iso_instant
from lakehouse.flows.sessions.late import Reconciled
from lakehouse.flows.sessions.processor import table_rows
from lakehouse.flows.sessions.state import checkpoint_watermark_ms, open_sessions_in_state
from lakehouse.sinks import ensure_table
from lakehouse.spark import build_spark_session


def _state_tag(checkpoint: str) -> str:
    """What an open-sessions commit was written from: the checkpoint (its generation) and its newest committed batch."""
    return f"open sessions of the state of {checkpoint} as of batch {checkpoint_log.newest(checkpoint, 'commits')}"


def open_sessions_current(sessions: Table, checkpoint: str) -> bool:
    """``gold.open_sessions`` was last rewritten from the state of the checkpoint's newest committed batch.

    From the tables' logs, no Spark job. Not so when a run died between its query and the rewrite:
    its retry, with nothing new to start a query for, rewrites it then.
    """
    written = delta_log.latest_commit_info(sessions.side("open").path)
    return written.get("userMetadata") == _state_tag(checkpoint)


def refresh_open_sessions(
    spark: SparkSession, sessions: Table, checkpoint: str, reconciled: Reconciled
) -> int:
    """Rewrite ``gold.open_sessions``: the state's open sessions, the recomputed ones for users with late events.

    The users with late events replace theirs by a join (``reconciled.dirty_users``), never a list.

    The commit is tagged with the batch whose state it holds (:func:`open_sessions_current`).
    """
    target = sessions.side("open")
    ensure_table(spark, target)
    opened = (
        open_sessions_in_state(spark, checkpoint)
        if (lake_path(checkpoint) / "state").is_dir()
        else None
    )
    dirty, truth = reconciled.dirty_users, reconciled.open_truth
    if opened is not None and dirty is not None:
        opened = opened.join(dirty, "user_id", "left_anti")
    if truth is not None:
        opened = truth if opened is None else opened.unionByName(truth)
    if opened is None:
        return 0
    rows = table_rows(opened, with_closes_at=True)
    rows.write.format("delta").mode("overwrite").option(
        "userMetadata", _state_tag(checkpoint)
    ).save(target.path)
    return int(
        delta_log.latest_commit_info(target.path)
        .get("operationMetrics", {})
        .get("numOutputRows", 0)
    )


def show_state(argv: list[str] | None = None) -> None:
    """Print what the sessions query holds in its state: for debugging, without touching it.

    Usage: ``spark-submit ... jobs/session_state.py [--user USER_ID] [--lakehouse-root DIR]``
    """
    import argparse

    parser = argparse.ArgumentParser(description=show_state.__doc__.splitlines()[0])
    parser.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    parser.add_argument("--user", help="show this user's open sessions")
    args = parser.parse_args(argv)
    table = next(t for t in catalog.tasks() if t.write is Write.SESSIONS)
    target = Lakehouse.from_env(args.lakehouse_root).table(table.name)
    checkpoint = target.checkpoint(target.current_generation())
    if not (lake_path(checkpoint) / "state").is_dir():
        raise ConfigError(
            f"{table.name}: no state in {checkpoint} yet: run the {table.task} task first"
        )
    spark = build_spark_session("session_state")
    spark.read.format("state-metadata").load(checkpoint).select(
        "operatorName", "numPartitions", "minBatchId", "maxBatchId"
    ).show(truncate=False)
    opened = table_rows(open_sessions_in_state(spark, checkpoint), with_closes_at=True)
    figures = opened.agg(
        F.count("*").alias("sessions"),
        F.countDistinct("user_id").alias("users"),
        F.min("session_start").alias("oldest_start"),
        F.max("session_end").alias("newest_event"),
    ).first()
    watermark = checkpoint_watermark_ms(checkpoint)
    print(
        f"{table.name}: checkpoint {checkpoint}\n  watermark {iso_instant(watermark) if watermark is not None else 'none'}; "
        f"{figures.sessions} open session(s) of {figures.users} user(s); oldest start {figures.oldest_start}, "
        f"newest event {figures.newest_event}"
    )
    if args.user:
        opened.where(F.col("user_id") == args.user).orderBy("session_start").show(truncate=False)
