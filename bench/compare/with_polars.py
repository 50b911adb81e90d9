"""Contender ``polars``: Polars with the project's outputs, written to Delta by delta-rs (``DataFrame.write_delta``).

The landing lines are scanned as one text column (``scan_lines``, with each line's file); a line
shaped like a JSON object (``{`` ... ``}``) is decoded to a struct of the contract's string fields
in one ``json_decode``; any other line is quarantined as malformed JSON. Polars has no lenient JSON
decode: a line shaped like an object but invalid inside would fail the job (the generator writes
none: its malformed lines are truncated objects or plain text). Then the quarantine reasons that
occur in the generated data (malformed JSON, a missing field, an event time that is not a number,
an unknown ad), a join with campaigns.csv, one row per ``event_id`` (``unique``), and the gold
aggregates from silver. Every table a plain overwrite with the catalog's partitioning; Polars uses
both cores (its default); timestamps are UTC.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from bench.compare import (
    AD_TYPE_HOURLY,
    CAMPAIGN_HOURLY,
    CAMPAIGN_WINDOWS,
    FIELDS,
    QUARANTINE,
    SILVER,
    WINDOW_SECONDS,
)


def run(spec: dict) -> dict:
    import polars as pl

    steps: dict[str, float] = {}
    utc = pl.Datetime("us", "UTC")

    def write(frame: pl.DataFrame, name: str) -> None:
        began = time.perf_counter()
        frame.write_delta(
            spec["tables"][name],
            mode="overwrite",
            delta_write_options={"partition_by": spec["partition_by"][name]},
        )
        steps[name] = time.perf_counter() - began

    began = time.perf_counter()
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
    classified = (
        pl.scan_lines(spec["lines"], name="raw_line", include_file_paths="source_file")
        .with_columns(_is_object=is_object, ingested_at=pl.lit(datetime.now(UTC)).cast(utc))
        .with_columns(_event=pl.when("_is_object").then(line).str.json_decode(event))
        .unnest("_event")
        .with_columns(_millis=millis)
        .join(campaigns, on="ad_id", how="left")
        .with_columns(reason=reason)
        .collect()
    )
    steps["classify"] = time.perf_counter() - began
    began = time.perf_counter()
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
    steps["dedup"] = time.perf_counter() - began
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
    write(
        hourly.group_by("campaign_id", "hour_start")
        .agg(*counts, distinct_users=pl.col("user_id").n_unique().cast(pl.Int64))
        .select(
            "campaign_id",
            "hour_start",
            "views",
            "clicks",
            "purchases",
            "distinct_users",
            ctr,
            event_date=pl.col("hour_start").dt.date(),
        )
        .collect(),
        CAMPAIGN_HOURLY,
    )
    write(
        hourly.group_by("ad_type", "hour_start")
        .agg(*counts)
        .select(
            "ad_type",
            "hour_start",
            "views",
            "clicks",
            "purchases",
            ctr,
            event_date=pl.col("hour_start").dt.date(),
        )
        .collect(),
        AD_TYPE_HOURLY,
    )
    return {"steps": steps}
