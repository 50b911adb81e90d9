"""A job's command line: its arguments (``--lakehouse-root``, ``--mode``, hours), logging, and the Airflow run it serves."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.config import Lakehouse, Table
from lakehouse.periods import Periods, parse_instant

if TYPE_CHECKING:
    pass

log = logging.getLogger("lakehouse")


@dataclass(frozen=True)
class JobArgs:
    """The run parameters every job accepts (Airflow passes them as ``application_args``)."""

    lakehouse: Lakehouse
    mode: str  # "incremental" (a streaming availableNow run) or "batch" (recompute an interval)
    interval: Periods | None  # the event hours [start, end) of a batch run
    generation: int | None  # checkpoint generation; None: the target table's current one
    max_files_per_trigger: int
    source: argparse.Namespace | None = None  # a source-fed table's own options (its flow's)
    # a batch run of a task of several tables: the ones to recompute (empty: all of them)
    tables: tuple[str, ...] = ()

    def generation_of(self, table: Table) -> int:
        return self.generation if self.generation is not None else table.current_generation()


def parse_job_args(
    description: str,
    argv: list[str] | None = None,
    batch: bool = True,
    source: argparse.Namespace | None = None,
    tables: tuple[str, ...] = (),
) -> JobArgs:
    """Parse a job's command line; a bad combination fails with a message that says what to fix.

    ``tables``: the tables of the job's task; a task of several takes ``--tables`` in batch mode.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    parser.add_argument(
        "--mode",
        choices=("incremental", "batch") if batch else ("incremental",),
        default="incremental",
    )
    parser.add_argument(
        "--start", help="batch mode: first event hour, ISO-8601 (e.g. 2026-11-20T13:00Z)"
    )
    parser.add_argument("--end", help="batch mode: end of the interval, exclusive")
    parser.add_argument(
        "--generation",
        type=int,
        help="checkpoint generation (default: the table's current one; a full refresh moves it)",
    )
    parser.add_argument("--max-files-per-trigger", type=int, default=1000)
    if len(tables) > 1:
        parser.add_argument(
            "--tables",
            default="",
            help="batch mode: recompute only these of the task's tables, comma-separated "
            f"(default: all of {', '.join(tables)})",
        )
    args = parser.parse_args(argv)
    chosen = tuple(name for name in getattr(args, "tables", "").split(",") if name)
    unknown = [name for name in chosen if name not in tables]
    if unknown:
        parser.error(
            f"--tables: {', '.join(unknown)} not of this task; its tables: {', '.join(tables)}"
        )
    if chosen and args.mode != "batch":
        parser.error(
            "--tables only applies to --mode batch: an incremental run's query writes all of its task's tables"
        )

    # Airflow renders the interval args of an incremental run as empty strings.
    args.start, args.end = args.start or None, args.end or None
    interval = None
    if args.mode == "batch":
        if not (args.start and args.end):
            parser.error(
                "--mode batch needs --start and --end (an event-time interval [start, end))"
            )
        interval = Periods.between(parse_instant(args.start), parse_instant(args.end))
    elif args.start or args.end:
        parser.error("--start/--end only apply to --mode batch")
    return JobArgs(
        lakehouse=Lakehouse.from_env(args.lakehouse_root),
        mode=args.mode,
        interval=interval,
        generation=args.generation,
        max_files_per_trigger=args.max_files_per_trigger,
        source=source,
        tables=chosen,
    )


def configure_logging() -> None:
    """The job's log lines; without a time of their own when a caller stamps each line
    (``LAKEHOUSE_LOG_TIMES=0``: an Airflow task reading a spark-submit driver's output)."""
    timed = os.environ.get("LAKEHOUSE_LOG_TIMES", "1") != "0"
    logging.basicConfig(
        level=logging.INFO,
        format=("%(asctime)s " if timed else "") + "%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def airflow_run() -> tuple[str | None, int | None]:
    """The Airflow dag run id and try number of the task running this job (None outside Airflow)."""
    try:
        airflow_try = int(os.environ["AIRFLOW_CTX_TRY_NUMBER"])
    except (KeyError, ValueError):
        airflow_try = None
    return os.environ.get("AIRFLOW_CTX_DAG_RUN_ID"), airflow_try
