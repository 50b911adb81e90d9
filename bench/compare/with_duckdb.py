"""Contender ``duckdb``: DuckDB SQL with the project's tables, written to Delta by delta-rs (``deltalake``).

The landing lines are read as one text column (``read_csv`` with no quoting and a separator the
lines never hold) and written as bronze, campaigns.csv as the dimension; a line is parsed only
when ``json_valid`` says it is JSON, its fields extracted in one ``json_extract_string`` call; then
the quarantine reasons that occur in the generated data (malformed JSON, a missing field, an event
time that is not a number, an unknown ad), a join with the campaigns, one row per ``event_id``
(``DISTINCT ON``), the gold aggregates from silver, and the sessions with window functions (a new
session where a user's event follows the previous one by the gap or more; a running sum numbers
them). No ops records (reported as not implemented).
Each table goes from Arrow to ``deltalake.write_deltalake`` (plain overwrite, the catalog's
partitioning). DuckDB uses both cores (its default: one thread per core); timestamps are UTC.
"""

from __future__ import annotations

import time

from bench.compare import (
    AD_TYPE_HOURLY,
    BRONZE,
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
)
from bench.harness import self_cpu


def run(spec: dict) -> dict:
    import duckdb
    from deltalake import write_deltalake

    steps: dict[str, dict] = {}
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")

    def write(sql: str, name: str) -> None:
        began, cpu = time.perf_counter(), self_cpu()
        write_deltalake(
            spec["tables"][name],
            con.sql(sql).to_arrow_table(),
            mode="overwrite",
            partition_by=spec["partition_by"][name],
        )
        steps[name] = {"wall": time.perf_counter() - began, "cpu": self_cpu() - cpu}

    def quoted(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    write(
        f"""SELECT * FROM read_csv({quoted(spec["campaigns"])}, header = true,
                                   columns = {{'ad_id': 'VARCHAR', 'campaign_id': 'VARCHAR'}})""",
        CAMPAIGNS,
    )
    began = time.perf_counter()
    con.execute(f"""
        CREATE TEMP TABLE bronze AS
        SELECT raw_line, filename AS source_file, current_timestamp AS ingested_at,
               CAST(current_timestamp AS DATE) AS ingest_date
        FROM read_csv({quoted(spec["lines"])}, columns = {{'raw_line': 'VARCHAR'}}, header = false,
                      delim = E'\\x01', quote = '', escape = '', auto_detect = false, filename = true)
    """)
    steps["read lines"] = {"wall": time.perf_counter() - began}
    write("SELECT * FROM bronze", BRONZE)
    began = time.perf_counter()
    paths = ", ".join(f"'$.{name}'" for name in FIELDS)
    field_columns = ", ".join(f"f[{i + 1}] AS {name}" for i, name in enumerate(FIELDS))
    missing = " OR ".join(f"{name} IS NULL" for name in FIELDS)
    con.execute(f"""
        CREATE TEMP TABLE classified AS
        WITH lines AS (
            SELECT raw_line, source_file, ingested_at,
                   CASE WHEN json_valid(raw_line) THEN json_type(raw_line) = 'OBJECT' ELSE false END AS is_object
            FROM bronze
        ), fields AS (
            SELECT raw_line, source_file, ingested_at, is_object,
                   CASE WHEN is_object THEN json_extract_string(raw_line, [{paths}]) END AS f
            FROM lines
        ), typed AS (
            SELECT raw_line, source_file, ingested_at, is_object, {field_columns} FROM fields
        )
        SELECT typed.*, c.campaign_id, TRY_CAST(event_time AS BIGINT) AS millis,
               CASE WHEN NOT is_object THEN 'malformed_json'
                    WHEN {missing} THEN 'missing_required_field'
                    WHEN TRY_CAST(event_time AS BIGINT) IS NULL THEN 'invalid_event_time'
                    WHEN c.campaign_id IS NULL THEN 'unknown_ad_id'
               END AS reason
        FROM typed LEFT JOIN read_csv({quoted(spec["campaigns"])}, header = true,
                                      columns = {{'ad_id': 'VARCHAR', 'campaign_id': 'VARCHAR'}}) c USING (ad_id)
    """)
    con.execute("DROP TABLE bronze")
    steps["classify"] = {"wall": time.perf_counter() - began}
    began = time.perf_counter()
    typed = ", ".join(
        "CAST(epoch_ms(millis) AS TIMESTAMPTZ) AS event_time" if name == "event_time" else name
        for name in FIELDS
    )
    con.execute(f"""
        CREATE TEMP TABLE silver AS
        SELECT DISTINCT ON (event_id) {typed}, campaign_id, source_file, ingested_at
        FROM classified WHERE reason IS NULL
    """)
    steps["dedup"] = {"wall": time.perf_counter() - began}
    write(
        f"""SELECT {", ".join(FIELDS)}, campaign_id, source_file, ingested_at,
                   CAST(event_time AS DATE) AS event_date, CAST(hour(event_time) AS INTEGER) AS event_hour
            FROM silver""",
        SILVER,
    )
    write(
        """SELECT raw_line, reason, source_file, ingested_at, CAST(ingested_at AS DATE) AS ingest_date
           FROM classified WHERE reason IS NOT NULL""",
        QUARANTINE,
    )
    con.execute("DROP TABLE classified")
    # Buckets from DuckDB's default origin (2000-01-03 00:00 UTC, a multiple of 10 s since the epoch).
    window_start = f"time_bucket(INTERVAL {WINDOW_SECONDS} SECOND, event_time)"
    write(
        f"""SELECT campaign_id, window_start, window_start + INTERVAL {WINDOW_SECONDS} SECOND AS window_end, views,
                   date_trunc('hour', window_start) AS hour_start, CAST(window_start AS DATE) AS event_date
            FROM (SELECT campaign_id, {window_start} AS window_start, count(*) AS views
                  FROM silver WHERE event_type = 'view' GROUP BY ALL)""",
        CAMPAIGN_WINDOWS,
    )
    counts = """count(*) FILTER (event_type = 'view') AS views, count(*) FILTER (event_type = 'click') AS clicks,
                count(*) FILTER (event_type = 'purchase') AS purchases"""
    ctr = "CASE WHEN views > 0 THEN clicks / views END AS ctr"
    write(
        f"""SELECT campaign_id, hour_start, views, clicks, purchases, distinct_users, {ctr},
                   CAST(hour_start AS DATE) AS event_date
            FROM (SELECT campaign_id, date_trunc('hour', event_time) AS hour_start, {counts},
                         count(DISTINCT user_id) AS distinct_users
                  FROM silver GROUP BY ALL)""",
        CAMPAIGN_HOURLY,
    )
    write(
        f"""SELECT ad_type, hour_start, views, clicks, purchases, {ctr}, CAST(hour_start AS DATE) AS event_date
            FROM (SELECT ad_type, date_trunc('hour', event_time) AS hour_start, {counts} FROM silver GROUP BY ALL)""",
        AD_TYPE_HOURLY,
    )
    # Sessions: a user's events in (event_time, event_id) order; a new one where the previous event
    # is the gap or more before; closed or open by the watermark (the newest event minus the delay).
    order = "PARTITION BY user_id ORDER BY event_time, event_id"
    began, cpu = time.perf_counter(), self_cpu()
    con.execute(f"""
        CREATE TEMP TABLE sessions AS
        WITH marked AS (
            SELECT *, coalesce(epoch_ms(event_time) - epoch_ms(lag(event_time) OVER ({order}))
                               >= {SESSION_GAP_MS}, true) AS starts
            FROM silver
        ), numbered AS (
            SELECT *, sum(CAST(starts AS INTEGER)) OVER ({order} ROWS UNBOUNDED PRECEDING) AS n
            FROM marked
        ), grouped AS (
            SELECT user_id, min(event_time) AS session_start, max(event_time) AS session_end, {counts},
                   count(*) AS events, count(DISTINCT ad_id) AS distinct_ads,
                   count(DISTINCT campaign_id) AS distinct_campaigns,
                   arg_min(campaign_id, (event_time, event_id)) AS first_campaign_id,
                   arg_max(campaign_id, (event_time, event_id)) AS last_campaign_id
            FROM numbered GROUP BY user_id, n
        )
        SELECT md5(user_id || '/' || CAST(epoch_ms(session_start) AS VARCHAR)) AS session_id, user_id,
               session_start, session_end,
               (epoch_ms(session_end) - epoch_ms(session_start)) / 1000.0 AS duration_seconds,
               events, views, clicks, purchases, distinct_ads, distinct_campaigns,
               first_campaign_id, last_campaign_id, CAST(session_start AS DATE) AS session_date,
               epoch_ms(session_end) + {SESSION_GAP_MS}
                   <= (SELECT epoch_ms(max(event_time)) FROM silver) - {WATERMARK_DELAY_MS} AS closed
        FROM grouped
    """)
    steps["sessions"] = {"wall": time.perf_counter() - began, "cpu": self_cpu() - cpu}
    write("SELECT * EXCLUDE (closed) FROM sessions WHERE closed", USER_SESSIONS)
    write(
        f"""SELECT * EXCLUDE (closed),
                   session_end + to_milliseconds({SESSION_GAP_MS}) AS closes_at
            FROM sessions WHERE NOT closed""",
        OPEN_SESSIONS,
    )
    con.close()
    return {"steps": steps, "tables": sorted(name for name in steps if "." in name)}
