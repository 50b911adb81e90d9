"""Full refresh: rebuild a layer, and every layer computed from it, from upstream.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/full_refresh.py --layer silver [--lakehouse-root DIR]

See ``lakehouse.refresh``.
"""

from lakehouse.refresh import main
from lakehouse.runtime import run_job

if __name__ == "__main__":
    run_job(main)
