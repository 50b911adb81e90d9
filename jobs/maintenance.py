"""Table maintenance: OPTIMIZE a table, then VACUUM it with a retention safe for its streaming readers.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/maintenance.py --table silver.ad_events \
        [--retain-hours 168] [--lakehouse-root DIR]

See ``lakehouse.maintenance``.
"""

from lakehouse.maintenance import main
from lakehouse.runtime import run_job

if __name__ == "__main__":
    run_job(main)
