"""The contenders of bench/engine_compare.py (issue 13): the same outputs from the same landing lines, four ways.

* ``project``: the project's own pipeline, task by task in DAG order (:mod:`bench.compare.project`);
* ``project_batch``: the same tasks, silver and gold in their batch form over the data's event hours
  (what a backfill runs): the incremental run's cost against the batch's on the same new data;
* ``plain_spark``: a minimal hand-written PySpark batch job (:mod:`bench.compare.plain_spark`);
* ``duckdb``: DuckDB SQL, written to Delta by delta-rs (:mod:`bench.compare.with_duckdb`);
* ``polars``: Polars, written to Delta by delta-rs (:mod:`bench.compare.with_polars`).

Each runs in a fresh process of its own (``python -m bench.compare.job CONTENDER SPEC.json``), so
its CPU figure is its whole process tree's, start-up included. A spec (:func:`spec_for`) says where
the landing lines and the campaigns file are and where each output table goes (the lakehouse's
layout, partitioned as the catalog declares); the minimal jobs take the paths from it and nothing
else from the project. :mod:`bench.compare.check` then compares their tables with the project's.
"""

from __future__ import annotations

# The project's own batch form: its CPU against the incremental run's is the incremental-to-batch ratio.
BATCH = "project_batch"
CONTENDERS = ("project", BATCH, "plain_spark", "duckdb", "polars")
# The project's pipeline at another commit (engine_compare's --baseline): the before of a change.
BASELINE = "baseline"
LABELS = {
    "project": "project (the pipeline, task by task)",
    BATCH: "project, batch form (a backfill of the same hours)",
    "plain_spark": "plain Spark (minimal batch job)",
    "duckdb": "DuckDB + delta-rs",
    "polars": "Polars + delta-rs",
}
MODULES = {
    "project": "bench.compare.project",
    BATCH: "bench.compare.project",
    "plain_spark": "bench.compare.plain_spark",
    "duckdb": "bench.compare.with_duckdb",
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

# The output tables by role: the minimal jobs write exactly these (the names are the catalog's).
SILVER = "silver.ad_events"
QUARANTINE = "silver.quarantine_ad_events"
CAMPAIGN_WINDOWS = "gold.campaign_windows"
CAMPAIGN_HOURLY = "gold.campaign_hourly"
AD_TYPE_HOURLY = "gold.ad_type_hourly"


def output_tables() -> list[str]:
    """The tables every contender must produce: the catalog's silver and gold tables of the YSB workload.

    Derived from the catalog, so a table added there fails the check until the minimal jobs write it too.
    The sessions (a stateful query and its side tables) are another workload, measured by the
    hourly-runs benchmark, not by this per-event comparison.
    """
    from lakehouse import catalog
    from lakehouse.catalog import Write

    def sessions(entry) -> bool:
        return Write.SESSIONS in (
            entry.write,
            entry.written_by and catalog.get(entry.written_by).write,
        )

    return [
        entry.name
        for entry in catalog.tables()
        if entry.layer in ("silver", "gold") and not sessions(entry)
    ]


def spec_for(root: str, contender: str, result: str) -> dict:
    """What a contender's process gets: its inputs under ``root``'s landing zone, its tables' paths and partitioning."""
    from lakehouse import catalog
    from lakehouse.config import Lakehouse

    lakehouse = Lakehouse(root)
    return {
        "contender": contender,
        "root": root,
        "lines": f"{lakehouse.landing_events}/*/*/*.jsonl",
        "campaigns": lakehouse.landing_campaigns,
        "tables": {name: lakehouse.table(name).path for name in output_tables()},
        "partition_by": {name: list(catalog.get(name).partition_by) for name in output_tables()},
        "result": result,
    }
