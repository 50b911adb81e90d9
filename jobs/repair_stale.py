"""Recompute the periods an older code version wrote, table by table, upstream first.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/repair_stale.py [--lakehouse-root DIR] [--dry-run]

See ``lakehouse.stale_repair``; ``lakehouse repair --stale`` and the ``ysb_repair_stale`` DAG run it.
"""

from lakehouse.runtime import run_job
from lakehouse.stale_repair import main

if __name__ == "__main__":
    run_job(main)
