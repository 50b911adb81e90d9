"""Contender ``duckdb``: DuckDB SQL with the project's outputs, written to Delta by delta-rs (``deltalake``).

The landing lines are read as one text column (``read_csv`` with no quoting and a separator the
lines never hold); a line is parsed only when ``json_valid`` says it is JSON, its fields extracted in
one ``json_extract_string`` call; then the quarantine reasons that occur in the generated data
(malformed JSON, a missing field, an event time that is not a number, an unknown ad), a join with
campaigns.csv, one row per ``event_id`` (``DISTINCT ON``), and the gold aggregates from silver.
Each table goes from Arrow to ``deltalake.write_deltalake`` (plain overwrite, the catalog's
partitioning). DuckDB uses both cores (its default: one thread per core); timestamps are UTC.
"""

from __future__ import annotations

import time

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
    import duckdb
    from deltalake import write_deltalake

    steps: dict[str, float] = {}
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")

    def write(sql: str, name: str) -> None:
        began = time.perf_counter()
        write_deltalake(
            spec["tables"][name],
            con.sql(sql).to_arrow_table(),
            mode="overwrite",
            partition_by=spec["partition_by"][name],
        )
        steps[name] = time.perf_counter() - began

    def quoted(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    began = time.perf_counter()
    paths = ", ".join(f"'$.{name}'" for name in FIELDS)
    field_columns = ", ".join(f"f[{i + 1}] AS {name}" for i, name in enumerate(FIELDS))
    missing = " OR ".join(f"{name} IS NULL" for name in FIELDS)
    con.execute(f"""
        CREATE TEMP TABLE classified AS
        WITH lines AS (
            SELECT raw_line, filename AS source_file, current_timestamp AS ingested_at,
                   CASE WHEN json_valid(raw_line) THEN json_type(raw_line) = 'OBJECT' ELSE false END AS is_object
            FROM read_csv({quoted(spec["lines"])}, columns = {{'raw_line': 'VARCHAR'}}, header = false,
                          delim = E'\\x01', quote = '', escape = '', auto_detect = false, filename = true)
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
    steps["classify"] = time.perf_counter() - began
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
    steps["dedup"] = time.perf_counter() - began
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
    con.close()
    return {"steps": steps}
