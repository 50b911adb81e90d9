"""The sessions query's watermark and state, read from its checkpoint; the state contract a checkpoint must match."""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse import checkpoint_log
from lakehouse.catalog import TableSpec
from lakehouse.config import Table
from lakehouse.errors import ConfigError
from lakehouse.files import lake_path, write_atomic
from lakehouse.flows.sessions.fragments import USER_BUCKETS
from lakehouse.flows.sessions.processor import (
    STATE_NAME,
    STATE_SCHEMA,
    STATE_VERSION,
    USERS_JSON_SCHEMA,
    batch_sessions,
    table_rows,
)
from lakehouse.runtime import (
    refresh_advice,
)
from lakehouse.tables.gold_user_sessions import (
    SESSION_GAP_MS,
    WATERMARK_DELAY,
    WATERMARK_DELAY_MS,
)


def checkpoint_watermark_ms(checkpoint: str) -> int | None:
    """The watermark of the checkpoint's newest planned batch (None: no batch yet)."""
    offsets = lake_path(checkpoint) / "offsets"
    for batch in reversed(checkpoint_log.batches(checkpoint, "offsets")):
        try:
            metadata = json.loads((offsets / str(batch)).read_text().splitlines()[1])
            return int(metadata.get("batchWatermarkMs", 0))
        except (OSError, ValueError, IndexError):
            continue
    return None


def watermark_for(spark: SparkSession, sessions: Table) -> int:
    """The stream's watermark, or (no stream yet) the one it will reach over today's silver."""
    recorded = checkpoint_watermark_ms(sessions.checkpoint(sessions.current_generation()))
    if recorded is not None:
        return recorded
    silver = sessions.upstream_tables()[0]
    return final_watermark(spark.read.format("delta").load(silver.path))


def final_watermark(silver: DataFrame) -> int:
    """The watermark the stream reaches once it has read all of ``silver``."""
    newest = silver.agg(F.max(F.unix_millis("event_time")).alias("newest")).first()["newest"]
    return (newest or 0) - WATERMARK_DELAY_MS


def whole_sessions(silver: DataFrame, table: TableSpec) -> tuple[DataFrame, DataFrame]:
    """Every session of ``silver`` as of :func:`final_watermark`: (closed rows, open rows); no stream, no state."""
    sessions = batch_sessions(table.transform(silver), final_watermark(silver))
    return table_rows(sessions.where(F.col("kind") == "session")), table_rows(
        sessions.where(F.col("kind") == "open"), with_closes_at=True
    )


def _contract() -> dict:
    return {
        "state_version": STATE_VERSION,
        "user_buckets": USER_BUCKETS,
        "state_schema": STATE_SCHEMA.simpleString(),
        "session_gap_ms": SESSION_GAP_MS,
        "watermark_delay": WATERMARK_DELAY,
    }


def check_state_contract(checkpoint: str, name: str) -> None:
    """Refuse to run a query whose state the checkpoint holds in another shape; record the shape otherwise.

    Spark would fail mid-batch on a changed state schema, and would carry on silently under a
    changed gap or meaning; both are caught here, before the query starts.
    """
    record = lake_path(f"{checkpoint}.state.json")
    has_state = bool(checkpoint_log.batches(checkpoint, "offsets"))
    wanted = _contract()
    if has_state and record.exists():
        recorded = json.loads(record.read_text())
        if recorded != wanted:
            changed = ", ".join(
                f"{k} {recorded.get(k)!r} -> {v!r}"
                for k, v in wanted.items()
                if recorded.get(k) != v
            )
            raise ConfigError(
                f"{name}: the sessions query changed in a way its checkpoint's state cannot take ({changed}; "
                f"state recorded in {record}). Nothing was written. The state is rebuilt from silver by a new "
                f"checkpoint generation. {refresh_advice('gold')}"
            )
        return
    write_atomic(record, json.dumps(wanted))


def open_sessions_in_state(spark: SparkSession, checkpoint: str) -> DataFrame:
    """The open sessions the query's state holds (Spark's state data source: also for debugging)."""
    spark.streams.active  # noqa: B018 - the state reader needs the state store coordinator a query manager starts
    state = spark.read.format("statestore").option("stateVarName", STATE_NAME).load(checkpoint)
    s = F.col("session")
    return (
        state.select(
            F.explode(F.from_json("value.users_json", USERS_JSON_SCHEMA)).alias("user")
        ).select(
            F.col("user.user_id").alias("user_id"), F.explode("user.sessions").alias("session")
        )
    ).select(
        F.lit("open").alias("kind"),
        "user_id",
        s.start_ms.alias("start_ms"),
        s.end_ms.alias("end_ms"),
        s.events.alias("events"),
        s.views.alias("views"),
        s.clicks.alias("clicks"),
        s.purchases.alias("purchases"),
        F.size(s.ads).cast("bigint").alias("distinct_ads"),
        F.size(s.campaigns).cast("bigint").alias("distinct_campaigns"),
        s.first_campaign_id.alias("first_campaign_id"),
        s.last_campaign_id.alias("last_campaign_id"),
        F.lit(None).cast("string").alias("event_id"),
        F.lit(None).cast("bigint").alias("event_ms"),
        F.lit(None).cast("bigint").alias("watermark_ms"),
    )
