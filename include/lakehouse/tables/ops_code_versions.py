"""ops.code_versions: which code version wrote each period of each table, a row per period a run wrote."""

from lakehouse.catalog import ops_table

SCHEMA = (
    "table_name STRING NOT NULL, period_start TIMESTAMP NOT NULL, grain STRING NOT NULL, "
    "code_version STRING NOT NULL, whole BOOLEAN NOT NULL, written_at TIMESTAMP NOT NULL, "
    "airflow_run_id STRING"
)

ops_table("ops.code_versions", operation="period-writing runs", schema=SCHEMA)
