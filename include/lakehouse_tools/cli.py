"""The `lakehouse` command: look at the Delta tables without Spark or a JVM.

Usage:
    lakehouse query "select * from gold.campaign_hourly order by views desc" [--limit N | --all] [--json]
    lakehouse status [--from 2026-11-20T00:00Z] [--to 2026-11-20T03:00Z] [--json] [--html status.html]
    lakehouse repair [--from ...] [--to ...] [--dry-run]
    lakehouse repair --stale [--dry-run]
    lakehouse rollback --to RUN_ID_OR_UTC_TIME [--dry-run]

Tables are read by delta-rs and queried by DuckDB (:mod:`lakehouse_tools.storage`) under the names
of the catalog: ``gold.campaign_hourly``, ``silver.ad_events``, ... The lakehouse is
``$LAKEHOUSE_ROOT`` (or ``--lakehouse-root``); ``make venv`` installs the command as
``.venv/bin/lakehouse``.

``query`` shows the first 50 rows, cut to the terminal's width (``--limit``, ``--all``; ``--json``
gives every row and column whole). ``status`` is a grid, one row per hour, and a state per hour
(:mod:`lakehouse_tools.status`); its exit code is 1 when an hour needs action (``missing``,
``stale``, ``mismatch``, ``failed``), 0 otherwise, 2 on a usage error. ``repair`` backfills,
through ``airflow backfill create``, the hours that status marks missing or stale; ``repair
--stale`` recomputes the periods an older code version wrote (``jobs/repair_stale.py``,
:mod:`lakehouse.stale_repair`), table by table, upstream first, and nothing else. ``rollback``
undoes what the runs since a moment wrote (:mod:`lakehouse_tools.rollback`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from lakehouse import code_versions, files
from lakehouse.config import Lakehouse
from lakehouse.errors import ConfigError
from lakehouse_tools import audit, rollback
from lakehouse_tools.observe import observe
from lakehouse_tools.status import NEEDS_ACTION, REPAIRABLE, Grid, grade, grid_json, grid_text
from lakehouse_tools.storage import UsageError, execute, query, utc
from lakehouse_tools.text_table import fitted_table_text, table_text

# What scripts and tests used from this module when it held the whole command.
__all__ = [
    "NEEDS_ACTION",
    "REPAIRABLE",
    "backfill_commands",
    "grade",
    "grid_text",
    "main",
    "observe",
]

DAG_ID = "ysb_hourly"  # dags/ysb_hourly.py: the DAG whose backfill recomputes event hours
VIEWS_TABLE = "gold.campaign_hourly"  # status --html draws its views per campaign and hour
DEFAULT_LIMIT = 50  # rows `query` shows on a screen unless told otherwise


# --------------------------------------------------------------------------------------------
# query


def _json_value(value):
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


# A table written to a pipe or a file: lines as wide as a wide terminal's (a quarantined raw line
# would otherwise make every row hundreds of characters wide); --wide keeps every value whole.
PIPE_WIDTH = 120


def screen_width() -> int | None:
    """The terminal's width in characters (``$COLUMNS`` first); None when the output goes to a file
    or a pipe."""
    if os.environ.get("COLUMNS", "").isdigit() or sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def run_query(
    lakehouse: Lakehouse, sql: str, limit: int | None, as_json: bool, wide: bool = False
) -> str:
    """The output of ``lakehouse query``: at most ``limit`` rows (None: all), as JSON or a table
    cut to the terminal's width (``PIPE_WIDTH`` to a pipe or a file; ``wide``: values whole)."""
    result = execute(lakehouse, sql)
    columns = [d[0] for d in result.description]
    rows = result.fetchall() if limit is None else result.fetchmany(limit + 1)
    more = limit is not None and len(rows) > limit
    rows = rows[:limit] if more else rows
    if as_json:
        return json.dumps(
            [{c: _json_value(v) for c, v in zip(columns, row)} for row in rows], indent=1
        )
    terminal = screen_width()
    width = None if wide else terminal or PIPE_WIDTH
    text, hidden = table_text(columns, rows), []
    cut = width is not None and max(map(len, text.splitlines()), default=0) > width
    if cut:
        text, hidden = fitted_table_text(columns, rows, width)
    footer = (
        f"({_plural(len(rows), 'row')} shown; more exist: --limit N shows N, --all every row)"
        if more
        else f"({_plural(len(rows), 'row')})"
    )
    if cut and terminal is None:
        footer += f"\n(cut to {width} characters a line: --wide shows every value whole, or --json)"
    if hidden:
        footer += (
            f"\n({_plural(len(hidden), 'more column')} did not fit: {', '.join(hidden)}; "
            "select fewer columns, or --json)"
        )
    return f"{text}\n{footer}"


# --------------------------------------------------------------------------------------------
# status, repair


def write_status_page(lakehouse: Lakehouse, grid: Grid, path: str, old_code: dict) -> None:
    """``status --html``: the grid and gold.campaign_hourly's views per campaign and hour, as one page."""
    from lakehouse_tools.status_page import status_page

    views: dict[str, dict[datetime, int]] = {}
    if grid.writes.get(VIEWS_TABLE):
        hours = [row.hour for row in grid.rows]
        bounds = f"where hour_start between '{min(hours)}' and '{max(hours)}'" if hours else ""
        for campaign, hour, count in query(
            lakehouse, f"select campaign_id, hour_start, views from {VIEWS_TABLE} {bounds}"
        )[1]:
            views.setdefault(campaign, {})[utc(hour)] = count
    page = status_page(grid, views, datetime.now(UTC), old_code)
    Path(path).write_text(page, encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)


def hour_ranges(hours: list[datetime]) -> list[tuple[datetime, datetime]]:
    """Contiguous runs of hours as [start, end) ranges."""
    ranges: list[tuple[datetime, datetime]] = []
    for hour in sorted(hours):
        if ranges and ranges[-1][1] == hour:
            ranges[-1] = (ranges[-1][0], hour + timedelta(hours=1))
        else:
            ranges.append((hour, hour + timedelta(hours=1)))
    return ranges


def backfill_commands(hours: list[datetime], dag_id: str = DAG_ID) -> list[list[str]]:
    """The ``airflow backfill create`` commands that recompute ``hours`` (a run at H owns [H-1h, H))."""
    commands = []
    for start, end in hour_ranges(hours):
        # The logical dates of the runs owning start .. end-1h.
        first, last = start + timedelta(hours=1), end
        commands.append(
            [
                *("airflow", "backfill", "create", "--dag-id", dag_id),
                *("--reprocess-behavior", "completed"),
                *("--from-date", f"{first:%Y-%m-%dT%H:%M:%S}+00:00"),
                *("--to-date", f"{last:%Y-%m-%dT%H:%M:%S}+00:00"),
            ]
        )
    return commands


def _repair(grid: Grid, dag_id: str, dry_run: bool) -> int:
    hours = [row.hour for row in grid.rows if row.state in REPAIRABLE]
    # A day table's day is recomputed whole by a backfill of any hour of it: its first hour.
    hours = sorted({*hours, *(row.hour for row in grid.day_rows if row.state in REPAIRABLE)})
    for row in grid.rows:
        if row.state == "mismatch":
            print(
                f"{row.hour:%Y-%m-%d %H:00} mismatch (a backfill does not fix it; look at it): "
                + "; ".join(row.reasons)
            )
    if not hours:
        print("Nothing to repair: no hour is missing or stale.")
        return 0
    status = 0
    for command in backfill_commands(hours, dag_id):
        print(("would run: " if dry_run else "running: ") + shlex.join(command))
        if not dry_run:
            status = status or subprocess.run(command).returncode
    return status


def _repair_stale(lakehouse: Lakehouse, dry_run: bool) -> int:
    """The repair job over what older code wrote, in a process of its own (this one stays free of Spark)."""
    job = Path(__file__).resolve().parents[2] / "jobs" / "repair_stale.py"
    command = [sys.executable, str(job), "--lakehouse-root", lakehouse.root]
    return subprocess.run(command + (["--dry-run"] if dry_run else [])).returncode


# --------------------------------------------------------------------------------------------
# rollback


def _rollback(lakehouse: Lakehouse, to: str, dry_run: bool) -> int:
    moment, since = rollback.moment_of(lakehouse, to)
    plans = rollback.plan(lakehouse, moment)
    print(
        f"Rolling back to before {moment.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z ({since})"
        + (", dry run" if dry_run else "")
    )
    for line in rollback.describe(plans) if dry_run else rollback.execute(plans):
        print(("would: " if dry_run else "done: ") + line)
    return 0


# --------------------------------------------------------------------------------------------
# The command line


def _hour_argument(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO hour: {value!r} (e.g. 2026-11-20T00:00Z)"
        ) from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.replace(minute=0, second=0, microsecond=0)


def _row_count(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"not a number of rows: {value!r} (e.g. --limit 200)")
    return int(value)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lakehouse", description=__doc__.split("\n\n")[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    commands = parser.add_subparsers(dest="command", required=True)
    q = commands.add_parser(
        "query",
        parents=[common],
        help="SQL (DuckDB) over every catalog table, e.g. gold.campaign_hourly",
    )
    q.add_argument("sql")
    q.add_argument("--json", action="store_true", help="rows as a JSON array of objects")
    rows = q.add_mutually_exclusive_group()
    rows.add_argument(
        "--limit",
        type=_row_count,
        metavar="N",
        help=f"show at most N rows (default: {DEFAULT_LIMIT} as a table, all as --json)",
    )
    rows.add_argument("--all", action="store_true", help="show every row")
    q.add_argument(
        "--wide",
        action="store_true",
        help=f"every value whole (default: cut to the terminal, or to {PIPE_WIDTH} characters to a pipe)",
    )
    for name, text in (
        ("status", "one row per hour: counts per table and a state"),
        ("repair", "backfill the hours status marks missing or stale"),
    ):
        sub = commands.add_parser(name, parents=[common], help=text)
        sub.add_argument(
            "--from",
            dest="start",
            type=_hour_argument,
            help="first hour (UTC), e.g. 2026-11-20T00:00Z",
        )
        sub.add_argument("--to", dest="end", type=_hour_argument, help="end hour, exclusive")
        if name == "status":
            sub.add_argument("--json", action="store_true")
            sub.add_argument(
                "--html",
                metavar="FILE",
                help="also write the grid and gold's views per campaign as a page",
            )
        else:
            sub.add_argument(
                "--dry-run", action="store_true", help="print the backfill commands, run nothing"
            )
            sub.add_argument("--dag-id", default=DAG_ID)
            sub.add_argument(
                "--stale",
                action="store_true",
                help="recompute the periods an older code version wrote, table by table (no Airflow)",
            )
    back = commands.add_parser(
        "rollback", parents=[common], help="undo what the runs since a moment wrote (silver, gold)"
    )
    back.add_argument(
        "--to",
        dest="to",
        required=True,
        help="an Airflow dag run id (undo it and later runs; incremental or batch) or a UTC time "
        "(e.g. 2026-11-20T03:05:00Z)",
    )
    back.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    commands.add_parser(
        "audit", parents=[common], help="find commits a writer without conditional put replaced"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        lakehouse = Lakehouse.from_env(args.lakehouse_root)
        # A wrong endpoint, key or bucket, said in one sentence before any table is read.
        if problem := files.check_reachable(lakehouse.root):
            raise ConfigError(problem)
        if args.command == "query":
            limit = args.limit or (None if args.all or args.json else DEFAULT_LIMIT)
            print(run_query(lakehouse, args.sql, limit, args.json, args.wide))
            return 0
        if args.command == "rollback":
            return _rollback(lakehouse, args.to, args.dry_run)
        if args.command == "repair" and args.stale:
            return _repair_stale(lakehouse, args.dry_run)
        if args.command == "audit":
            return audit.run(lakehouse)
        if args.start and args.end and args.start >= args.end:
            raise UsageError(
                f"--from {args.start:%Y-%m-%dT%H:00Z} is not before --to {args.end:%Y-%m-%dT%H:00Z}"
            )
        grid = grade(observe(lakehouse), args.start, args.end)
        if args.command == "status":
            old_code = code_versions.stale(lakehouse)
            if args.json:
                stale_code = code_versions.stale_json(old_code)
                print(json.dumps({**grid_json(grid), "stale_code": stale_code}, indent=1))
            else:
                print(grid_text(grid))
                if old_code:
                    print("\nWritten by older code (lakehouse repair --stale recomputes them):")
                    print(code_versions.stale_text(old_code))
            if args.html:
                write_status_page(lakehouse, grid, args.html, old_code)
            return 1 if grid.needs_action or grid.unread_files or old_code else 0
        return _repair(grid, args.dag_id, args.dry_run)
    except ConfigError as error:
        print(f"lakehouse: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
