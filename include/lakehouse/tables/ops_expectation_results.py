"""ops.expectation_results: every check of a table's data-quality rules (lakehouse.expectations)."""

from lakehouse.catalog import Retention, ops_table

# hour_start for a rule measured per event hour, batch_id for one measured per micro-batch.
SCHEMA = (
    "checked_at TIMESTAMP NOT NULL, table_name STRING NOT NULL, rule STRING NOT NULL, on_failure STRING NOT NULL, "
    "measure STRING, holds STRING, hour_start TIMESTAMP, batch_id BIGINT, observed DOUBLE, passed BOOLEAN NOT NULL, "
    "mode STRING, airflow_run_id STRING, airflow_try INT"
)

# The newest result of a rule for an hour, when it failed, stays past the retention: it still
# gates that hour (lakehouse.expectations.still_failing) until a later check passes.
NEWEST_FAILED = (
    "NOT passed AND checked_at = max(checked_at) OVER (PARTITION BY table_name, rule, hour_start)"
)

ops_table(
    "ops.expectation_results",
    operation="expectations",
    schema=SCHEMA,
    retention=Retention("checked_at", days=30, keep=NEWEST_FAILED),
)
