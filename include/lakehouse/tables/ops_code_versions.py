"""ops.code_versions: which code version wrote each period of each table, a row per period a run wrote."""

from lakehouse.catalog import Retention, ops_table

SCHEMA = (
    "table_name STRING NOT NULL, period_start TIMESTAMP NOT NULL, grain STRING NOT NULL, "
    "code_version STRING NOT NULL, whole BOOLEAN NOT NULL, written_at TIMESTAMP NOT NULL, "
    "airflow_run_id STRING"
)

# What stays past the retention is what judging a period needs (lakehouse.code_versions): the
# versions that wrote it since its last whole write, one row each (the newest). Older rows, and
# repeats of a version, say nothing more, so a period keeps a row per version, not one per run.
SINCE_LAST_WHOLE_WRITE = (
    "written_at >= coalesce(max(CASE WHEN whole THEN written_at END) "
    "OVER (PARTITION BY table_name, period_start), TIMESTAMP '1970-01-01 00:00:00') "
    "AND written_at = max(written_at) OVER (PARTITION BY table_name, period_start, code_version)"
)

ops_table(
    "ops.code_versions",
    operation="period-writing runs",
    schema=SCHEMA,
    retention=Retention("written_at", days=30, keep=SINCE_LAST_WHOLE_WRITE),
)
