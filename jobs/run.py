"""Run one table's job: ``spark-submit ... jobs/run.py <task> [--mode batch --start ... --end ...]``.

The task is a table's module in include/lakehouse/tables (the DAG's task id); see
``lakehouse.runner`` for the options and ``python -m lakehouse.catalog`` for the tasks.
"""

import sys

from lakehouse.runner import main
from lakehouse.runtime import run_job

if __name__ == "__main__":
    run_job(lambda: main(sys.argv[1:]))
