"""Show the sessions query's state (open sessions, watermark): ``spark-submit ... jobs/session_state.py [--user ID]``."""

import sys

from lakehouse.flows.sessions import show_state
from lakehouse.runtime import run_job

if __name__ == "__main__":
    run_job(lambda: show_state(sys.argv[1:]))
