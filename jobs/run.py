"""Run one table's job: ``spark-submit ... jobs/run.py <task> [--mode batch --start ... --end ...]``.

The task is a table's module in include/lakehouse/tables (the DAG's task id); see
``lakehouse.runner`` for the options and ``python -m lakehouse.catalog`` for the tasks.

With ``$LAKEHOUSE_SUMMARY_FILE`` set (the Airflow operator sets it for spark-submit), the job's
summary is also written there as JSON: the tables and event hours it wrote reach the task's asset
events after the driver has ended.
"""

import json
import os
import sys

from lakehouse.runner import main
from lakehouse.runtime import run_job

SUMMARY_FILE_ENV = "LAKEHOUSE_SUMMARY_FILE"  # lakehouse_airflow.operators names the same variable


def main_handing_back_its_summary() -> None:
    summary = main(sys.argv[1:])
    if path := os.environ.get(SUMMARY_FILE_ENV):
        with open(path, "w", encoding="utf-8") as handed_back:
            json.dump(summary, handed_back, default=str)


if __name__ == "__main__":
    run_job(main_handing_back_its_summary)
