"""Consistency check: recompute event hours in batch mode into a scratch location and diff the live tables.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/consistency_check.py \
        --start 2026-11-20T00:00Z --end 2026-11-20T03:00Z [--lakehouse-root DIR] [--scratch DIR]

See ``lakehouse.consistency``.
"""

from lakehouse.consistency import main
from lakehouse.runtime import run_job

if __name__ == "__main__":
    run_job(main)
