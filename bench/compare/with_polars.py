"""Contender ``polars``: Polars with the project's tables, written to Delta by delta-rs (``DataFrame.write_delta``).

The landing lines are scanned as one text column (``scan_lines``, with each line's file) and
written as bronze, campaigns.csv as the dimension; a line
shaped like a JSON object (``{`` ... ``}``) is decoded to a struct of the contract's string fields
in one ``json_decode``; any other line is quarantined as malformed JSON. Polars has no lenient JSON
decode: a line shaped like an object but invalid inside would fail the job (the generator writes
none: its malformed lines are truncated objects or plain text). Then the quarantine reasons that
occur in the generated data (malformed JSON, a missing field, an event time that is not a number,
an unknown ad), a join with campaigns.csv, one row per ``event_id`` (``unique``), the gold
aggregates from silver, and the sessions (a user's events sorted; a new session where one follows
the previous by the gap or more; a cumulative sum numbers them). Polars has no MD5, so the
sessions' ids (an MD5 of user and start, as the project's) are hashed in Python, once per session.
No ops records (reported as not implemented). Every table a plain overwrite with the catalog's partitioning; Polars uses
both cores (its default); timestamps are UTC.
"""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime

from bench.compare import (
    AD_HOURLY,
    AD_TYPE_HOURLY,
    BRONZE,
    CAMPAIGN_DAILY,
    CAMPAIGN_HOURLY,
    CAMPAIGN_WINDOWS,
    CAMPAIGNS,
    FIELDS,
    OPEN_SESSIONS,
    QUARANTINE,
    SESSION_GAP_MS,
    SILVER,
    USER_SESSIONS,
    WATERMARK_DELAY_MS,
    WINDOW_SECONDS,
    hourly_columns,
)
from bench.harness import self_cpu


def run(spec: dict) -> dict:
    import polars as pl

    steps: dict[str, dict] = {}
    utc = pl.Datetime("us", "UTC")

    def write(frame: pl.DataFrame, name: str) -> None:
        began, cpu = time.perf_counter(), self_cpu()
        frame.write_delta(
            spec["tables"][name],
            mode="overwrite",
            delta_write_options={"partition_by": spec["partition_by"][name]},
        )
        steps[name] = {"wall": time.perf_counter() - began, "cpu": self_cpu() - cpu}

    line = pl.col("raw_line")
    is_object = line.str.starts_with("{") & line.str.ends_with("}")
    event = pl.Struct({name: pl.String for name in FIELDS})
    millis = pl.col("event_time").cast(pl.Int64, strict=False)
    campaigns = pl.scan_csv(
        spec["campaigns"], schema={"ad_id": pl.String, "campaign_id": pl.String}
    )
    reason = (
        pl.when(~pl.col("_is_object"))
        .then(pl.lit("malformed_json"))
        .when(pl.any_horizontal(pl.col(name).is_null() for name in FIELDS))
        .then(pl.lit("missing_required_field"))
        .when(pl.col("_millis").is_null())
        .then(pl.lit("invalid_event_time"))
        .when(pl.col("campaign_id").is_null())
        .then(pl.lit("unknown_ad_id"))
    )
    dimension = campaigns.collect()
    write(dimension, CAMPAIGNS)
    bronze = (
        pl.scan_lines(spec["lines"], name="raw_line", include_file_paths="source_file")
        .with_columns(ingested_at=pl.lit(datetime.now(UTC)).cast(utc))
        .with_columns(ingest_date=pl.col("ingested_at").dt.date())
        .collect()
    )
    write(bronze, BRONZE)
    classified = (
        bronze.lazy()
        .drop("ingest_date")
        .with_columns(_is_object=is_object)
        .with_columns(_event=pl.when("_is_object").then(line).str.json_decode(event))
        .unnest("_event")
        .with_columns(_millis=millis)
        .join(dimension.lazy(), on="ad_id", how="left")
        .with_columns(reason=reason)
        .collect()
    )
    del bronze
    event_time = pl.from_epoch("_millis", time_unit="ms").dt.replace_time_zone("UTC").cast(utc)
    silver = (
        classified.lazy()
        .filter(pl.col("reason").is_null())
        .unique(subset="event_id", keep="any")
        .select(
            *[event_time.alias(name) if name == "event_time" else name for name in FIELDS],
            "campaign_id",
            "source_file",
            "ingested_at",
        )
        .with_columns(
            event_date=pl.col("event_time").dt.date(),
            event_hour=pl.col("event_time").dt.hour().cast(pl.Int32),
        )
        .collect()
    )
    write(silver, SILVER)
    write(
        classified.filter(pl.col("reason").is_not_null()).select(
            "raw_line",
            "reason",
            "source_file",
            "ingested_at",
            ingest_date=pl.col("ingested_at").dt.date(),
        ),
        QUARANTINE,
    )
    del classified

    ctr = pl.when(pl.col("views") > 0).then(pl.col("clicks") / pl.col("views")).alias("ctr")

    def count_of(event_type: str) -> pl.Expr:
        return (pl.col("event_type") == event_type).sum().cast(pl.Int64)

    counts = [
        count_of("view").alias("views"),
        count_of("click").alias("clicks"),
        count_of("purchase").alias("purchases"),
    ]
    hourly = silver.lazy().with_columns(hour_start=pl.col("event_time").dt.truncate("1h"))
    window_start = pl.col("event_time").dt.truncate(f"{WINDOW_SECONDS}s")
    write(
        silver.lazy()
        .filter(pl.col("event_type") == "view")
        .group_by("campaign_id", window_start.alias("window_start"))
        .agg(views=pl.len().cast(pl.Int64))
        .select(
            "campaign_id",
            "window_start",
            (pl.col("window_start") + pl.duration(seconds=WINDOW_SECONDS)).alias("window_end"),
            "views",
            pl.col("window_start").dt.truncate("1h").alias("hour_start"),
            pl.col("window_start").dt.date().alias("event_date"),
        )
        .collect(),
        CAMPAIGN_WINDOWS,
    )
    users = pl.col("user_id").n_unique().cast(pl.Int64).alias("distinct_users")

    def per_hour(*keys: str, distinct_users: bool = False) -> pl.DataFrame:
        """Each group's hourly counts and CTR, columns in the catalog's order."""
        extra = [users] if distinct_users else []
        return (
            hourly.group_by(*keys, "hour_start")
            .agg(*counts, *extra)
            .with_columns(ctr, event_date=pl.col("hour_start").dt.date())
            .select(hourly_columns(keys, distinct_users))
            .collect()
        )

    write(per_hour("campaign_id", distinct_users=True), CAMPAIGN_HOURLY)
    write(per_hour("ad_type"), AD_TYPE_HOURLY)
    write(per_hour("ad_id", "campaign_id"), AD_HOURLY)
    write(
        silver.lazy()
        .with_columns(event_date=pl.col("event_time").dt.date())
        .group_by("campaign_id", "event_date")
        .agg(*counts, users)
        .select("campaign_id", "views", "clicks", "purchases", "distinct_users", ctr, "event_date")
        .collect(),
        CAMPAIGN_DAILY,
    )

    # Sessions: a user's events in (event_time, event_id) order; a new one where the previous event
    # is the gap or more before; closed or open by the watermark (the newest event minus the delay).
    began, cpu = time.perf_counter(), self_cpu()
    millis = pl.col("event_time").dt.epoch("ms")
    watermark = silver["event_time"].dt.epoch("ms").max() - WATERMARK_DELAY_MS
    sessions = (
        silver.lazy()
        .select("user_id", "event_time", "event_id", "event_type", "ad_id", "campaign_id")
        .sort("user_id", "event_time", "event_id")
        .with_columns(
            _n=(millis - millis.shift(1).over("user_id") >= SESSION_GAP_MS)
            .fill_null(True)
            .cast(pl.Int32)
            .cum_sum()
            .over("user_id")
        )
        .group_by("user_id", "_n", maintain_order=True)
        .agg(
            session_start=pl.col("event_time").first(),
            session_end=pl.col("event_time").last(),
            events=pl.len().cast(pl.Int64),
            views=count_of("view"),
            clicks=count_of("click"),
            purchases=count_of("purchase"),
            distinct_ads=pl.col("ad_id").n_unique().cast(pl.Int64),
            distinct_campaigns=pl.col("campaign_id").n_unique().cast(pl.Int64),
            first_campaign_id=pl.col("campaign_id").first(),
            last_campaign_id=pl.col("campaign_id").last(),
        )
        .select(
            pl.concat_str(
                "user_id", pl.lit("/"), pl.col("session_start").dt.epoch("ms").cast(pl.String)
            )
            .map_elements(lambda key: hashlib.md5(key.encode()).hexdigest(), return_dtype=pl.String)
            .alias("session_id"),
            "user_id",
            "session_start",
            "session_end",
            (
                (pl.col("session_end").dt.epoch("ms") - pl.col("session_start").dt.epoch("ms"))
                / 1000.0
            ).alias("duration_seconds"),
            *spec["session_figures"],
            session_date=pl.col("session_start").dt.date(),
            _closed=pl.col("session_end").dt.epoch("ms") + SESSION_GAP_MS <= watermark,
        )
        .collect()
    )
    steps["sessions"] = {"wall": time.perf_counter() - began, "cpu": self_cpu() - cpu}
    write(sessions.filter("_closed").drop("_closed"), USER_SESSIONS)
    write(
        sessions.filter(~pl.col("_closed"))
        .drop("_closed")
        .with_columns(closes_at=pl.col("session_end") + pl.duration(milliseconds=SESSION_GAP_MS)),
        OPEN_SESSIONS,
    )
    return {"steps": steps, "tables": sorted(name for name in steps if "." in name)}
