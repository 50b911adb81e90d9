"""The contenders of bench/engine_compare.py: the same tables from the same landing lines.

* ``project``: the project's own pipeline, task by task in DAG order (:mod:`bench.compare.project`);
* ``project_batch``: the same tasks, silver and gold in their batch form over the data's event hours
  (what a backfill runs): the incremental run's cost against the batch's on the same new data;
* ``plain_spark``: a minimal hand-written PySpark batch job (:mod:`bench.compare.plain_spark`);
* ``polars``: Polars, written to Delta by delta-rs (:mod:`bench.compare.with_polars`): the
  single-machine reference.

Each runs in a fresh process of its own (``python -m bench.engine_compare worker CONTENDER
SPEC.json``), so its CPU figure is its whole process tree's, start-up included. A spec (:func:`spec_for`) says where
the landing lines and the campaigns file are and where every table the catalog declares goes (the
lakehouse's layout, partitioned as the catalog declares); the minimal jobs take the paths from it
and nothing else from the project, and write the tables of :data:`MINIMAL_TABLES` (the ops
records are the project's alone: reported as not implemented). :mod:`bench.compare.check` then
compares every table with the project's, and the project's with the oracle's.
"""

from __future__ import annotations

from bench.harness import declared_tables

# The project's own batch form: its CPU against the incremental run's is the incremental-to-batch ratio.
BATCH = "project_batch"
CONTENDERS = ("project", BATCH, "plain_spark", "polars")
LABELS = {
    "project": "project (the pipeline, task by task)",
    BATCH: "project, batch form (a backfill of the same hours)",
    "plain_spark": "plain Spark (minimal batch job)",
    "polars": "Polars + delta-rs",
}
MODULES = {
    "project": "bench.compare.project",
    BATCH: "bench.compare.project",
    "plain_spark": "bench.compare.plain_spark",
    "polars": "bench.compare.with_polars",
}
# The event contract's fields, as the producer writes them (all JSON strings; event_time is epoch millis).
FIELDS = (
    "event_id",
    "user_id",
    "page_id",
    "ad_id",
    "ad_type",
    "event_type",
    "event_time",
    "ip_address",
)
WINDOW_SECONDS = 10

# The tables the minimal jobs write, by the catalog's names (each job is hand-written for them).
CAMPAIGNS = "dims.campaigns"
BRONZE = "bronze.ad_events"
SILVER = "silver.ad_events"
QUARANTINE = "silver.quarantine_ad_events"
CAMPAIGN_WINDOWS = "gold.campaign_windows"
CAMPAIGN_HOURLY = "gold.campaign_hourly"
AD_TYPE_HOURLY = "gold.ad_type_hourly"
AD_HOURLY = "gold.ad_hourly"
CAMPAIGN_DAILY = "gold.campaign_daily"
USER_SESSIONS = "gold.user_sessions"
OPEN_SESSIONS = "gold.open_sessions"
MINIMAL_TABLES = (
    CAMPAIGNS,
    BRONZE,
    SILVER,
    QUARANTINE,
    AD_HOURLY,
    AD_TYPE_HOURLY,
    CAMPAIGN_DAILY,
    CAMPAIGN_HOURLY,
    CAMPAIGN_WINDOWS,
    USER_SESSIONS,
    OPEN_SESSIONS,
)


def hourly_columns(keys: tuple[str, ...], distinct_users: bool = False) -> list[str]:
    """A per-hour KPI table's columns (gold.campaign_hourly, ad_hourly, ad_type_hourly) in the catalog's order."""
    users = ["distinct_users"] if distinct_users else []
    return [*keys, "hour_start", "views", "clicks", "purchases", *users, "ctr", "event_date"]


# The session semantics of gold.user_sessions (lakehouse/tables/gold_user_sessions.py), restated:
# a gap of 30 minutes or more between a user's events starts a new session; a session is closed
# once its last event plus the gap is at or behind the watermark, the newest event minus 10 minutes.
SESSION_GAP_MS = 30 * 60 * 1000
WATERMARK_DELAY_MS = 10 * 60 * 1000


def implemented(contender: str) -> tuple[str, ...] | None:
    """The tables ``contender`` writes; None for the project's own runs (every table its tasks write)."""
    if contender == "project":
        return None
    if contender == BATCH:
        # The batch form recomputes a table's own rows; what the stream writes beside them (the
        # quarantine, open sessions, metrics, late events) it leaves to the stream.
        from lakehouse import catalog

        specs = catalog.tables()
        batch = {spec.name for spec in specs if spec.batch}
        return tuple(spec.name for spec in specs if spec.written_by not in batch)
    return MINIMAL_TABLES


def session_figures() -> list[str]:
    """A session's figures, as the catalog declares gold.user_sessions: its columns between the
    duration and the date."""
    from lakehouse import catalog

    names = list(catalog.get(USER_SESSIONS).column_names)
    return names[names.index("duration_seconds") + 1 : names.index("session_date")]


def spec_for(root: str, contender: str) -> dict:
    """What a contender's process gets: its inputs under ``root``'s landing zone, every table's path and partitioning."""
    from lakehouse import catalog
    from lakehouse.config import Lakehouse

    lakehouse = Lakehouse(root)
    names = declared_tables()
    return {
        "contender": contender,
        "root": root,
        "lines": f"{lakehouse.landing_events}/*/*/*.jsonl",
        "campaigns": lakehouse.landing_campaigns,
        "tables": {name: lakehouse.table(name).path for name in names},
        "partition_by": {name: list(catalog.get(name).partition_by) for name in names},
        "session_figures": session_figures(),
    }
