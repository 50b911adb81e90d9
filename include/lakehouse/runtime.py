"""What every job entry point shares: arguments, logging, and running a query to completion."""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming import DataStreamWriter

from lakehouse.config import ConfigError, Lakehouse, TablePaths
from lakehouse.hours import HourRange, parse_instant

log = logging.getLogger("lakehouse")


@dataclass(frozen=True)
class JobArgs:
    """The run parameters every job accepts (Airflow passes them as ``application_args``)."""

    lakehouse: Lakehouse
    mode: str  # "incremental" (a streaming availableNow run) or "batch" (recompute an interval)
    hours: HourRange | None  # the interval of a batch run
    generation: int | None  # checkpoint generation; None: the target table's current one
    max_files_per_trigger: int

    def generation_of(self, table: TablePaths) -> int:
        return self.generation if self.generation is not None else table.current_generation()


def parse_job_args(description: str, argv: list[str] | None = None, batch: bool = True) -> JobArgs:
    """Parse a job's command line; a bad combination fails with a message that says what to fix."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    parser.add_argument("--mode", choices=("incremental", "batch") if batch else ("incremental",), default="incremental")
    parser.add_argument("--start", help="batch mode: first event hour, ISO-8601 (e.g. 2026-11-20T13:00Z)")
    parser.add_argument("--end", help="batch mode: end of the interval, exclusive")
    parser.add_argument(
        "--generation", type=int, help="checkpoint generation (default: the table's current one; a full refresh moves it)"
    )
    parser.add_argument("--max-files-per-trigger", type=int, default=1000)
    args = parser.parse_args(argv)

    # Airflow renders the interval args of an incremental run as empty strings.
    args.start, args.end = args.start or None, args.end or None
    hours = None
    if args.mode == "batch":
        if not (args.start and args.end):
            parser.error("--mode batch needs --start and --end (an event-time interval [start, end))")
        hours = HourRange.between(parse_instant(args.start), parse_instant(args.end))
    elif args.start or args.end:
        parser.error("--start/--end only apply to --mode batch")
    return JobArgs(
        lakehouse=Lakehouse.from_env(args.lakehouse_root),
        mode=args.mode,
        hours=hours,
        generation=args.generation,
        max_files_per_trigger=args.max_files_per_trigger,
    )


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )


class CheckpointBusy(ConfigError):
    """Another driver is running the same streaming query (e.g. an Airflow retry beside the first try)."""


@contextmanager
def checkpoint_lock(checkpoint: str, name: str) -> Iterator[None]:
    """Hold an exclusive lock on ``checkpoint`` for this driver's lifetime, or fail fast.

    Spark does not stop two drivers from running one checkpoint at the same time. The sinks'
    transaction ids already keep a second writer from committing a batch twice, but two drivers
    racing on the offset log fail late and confusingly; this lock makes the second one fail at
    once with a clear message. The kernel drops the lock when the holder dies, even by SIGKILL.
    (A POSIX lock: it covers drivers on one machine or a shared POSIX file system.)
    """
    Path(checkpoint).mkdir(parents=True, exist_ok=True)
    lock_path = Path(checkpoint) / ".driver.lock"
    handle = open(lock_path, "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise CheckpointBusy(
                f"{name}: another driver is already running on checkpoint {checkpoint} ({holder}). "
                "Not starting a second writer; let it finish (an Airflow retry will run after it)."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
        handle.flush()
        yield
    finally:
        handle.close()


def run_available_now(writer: DataStreamWriter, checkpoint: str, name: str) -> dict:
    """Process everything new since the checkpoint, then stop (``trigger(availableNow=True)``); a summary."""
    with checkpoint_lock(checkpoint, name):
        query = writer.queryName(name).option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
        try:
            query.awaitTermination()
        except StreamingQueryException as error:
            explained = explain_query_failure(error, name, checkpoint)
            if explained is error:
                raise
            raise explained from error
    batches = [p for p in query.recentProgress if p.get("batchId") is not None]
    rows = sum(p.get("numInputRows", 0) for p in batches)
    log.info("%s: %d micro-batch(es), %d input row(s), checkpoint %s", name, len(batches), rows, checkpoint)
    return {"table": name, "micro_batches": len(batches), "input_rows": rows}


def explain_query_failure(error: Exception, name: str, checkpoint: str) -> Exception:
    """Turn a streaming failure caused by the checkpoint into an error that says how to recover."""
    message = str(error)
    table = name
    refresh = (
        f"rebuild {table} from upstream with a new checkpoint generation: trigger ysb_hourly with "
        f"full_refresh={table.split('.')[0]} (or run jobs/full_refresh.py --layer {table.split('.')[0]})"
    )
    if "Log file was malformed" in message or "Incomplete log file" in message or "unexpected end" in message.lower():
        return ConfigError(
            f"{table}: the checkpoint {checkpoint} has a corrupted log file ({message.splitlines()[0][:200]}). "
            "To recover, delete the newest file in its offsets/ folder (and the same number in commits/ "
            "if present): that batch is then planned and written again, which the idempotent sinks make safe. "
            f"Or {refresh}."
        )
    incompatible = ("not compatible", "StateSchemaNotCompatible", "schema is not compatible",
                    "STATE_STORE_", "STREAMING_STATEFUL_OPERATOR")  # fmt: skip
    if any(marker in message for marker in incompatible):
        return ConfigError(
            f"{table}: the query no longer matches its checkpoint {checkpoint} "
            f"({message.splitlines()[0][:200]}). To start over, {refresh}."
        )
    return error


def run_job(main: Callable[[], None]) -> None:
    """Run a job's ``main`` from the command line; a configuration error exits 2 with its message."""
    configure_logging()
    try:
        main()
    except ConfigError as error:
        log.error("%s", error)
        sys.exit(2)
