"""Periods written by older code, shown and recomputed: ``lakehouse status`` and ``lakehouse repair --stale``.

What wrote each period is read from ``ops.code_versions`` by delta-rs (no JVM); which of those
periods are stale is :func:`lakehouse.code_versions.stale_periods`. Repair recomputes them with
each table's batch form (``jobs/run.py <task> --mode batch``), table by table, upstream first:
silver's periods before the gold tables computed from them. Only the tables with stale periods
are written, each over its own stale periods; a scheduled hourly run may go on beside it (the
batch writes retry on a write conflict, as a backfill's do).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from datetime import UTC
from pathlib import Path

from lakehouse import catalog, code_versions
from lakehouse.code_versions import StalePeriod, Written
from lakehouse.config import Lakehouse
from lakehouse_tools.storage import open_delta

JOBS_RUN = Path(__file__).resolve().parents[2] / "jobs" / "run.py"


def written_periods(lakehouse: Lakehouse) -> list[Written]:
    """Every record of ``ops.code_versions`` (none before a run recorded one)."""
    delta = open_delta(lakehouse.table(code_versions.RECORDS).path)
    if delta is None:
        return []
    columns = ["table_name", "period_start", "code_version", "whole", "written_at"]
    rows = delta.to_pyarrow_table(columns=columns).to_pylist()
    return [Written(**{k: _aware(v) for k, v in row.items()}) for row in rows]


def _aware(value):
    return value.replace(tzinfo=UTC) if hasattr(value, "tzinfo") and value.tzinfo is None else value


def stale(lakehouse: Lakehouse) -> dict[str, list[StalePeriod]]:
    """Per table, upstream first, its periods that today's code would compute differently."""
    return code_versions.stale_periods(written_periods(lakehouse))


def ranges(periods: list[StalePeriod]) -> list[tuple]:
    """Contiguous runs of periods as [start, end) ranges."""
    found: list[list] = []
    for period in sorted(periods, key=lambda p: p.period_start):
        end = code_versions.period_end(period)
        if found and found[-1][1] == period.period_start:
            found[-1][1] = end
        else:
            found.append([period.period_start, end])
    return [tuple(r) for r in found]


def stale_json(found: dict[str, list[StalePeriod]]) -> dict:
    return {
        name: {
            "code_version": catalog.code_version(name),
            "periods": [
                {"start": p.grain.label(p.period_start), "reason": p.reason} for p in periods
            ],
        }
        for name, periods in found.items()
    }


def stale_text(found: dict[str, list[StalePeriod]]) -> str:
    """One line per table and range of stale periods (empty when nothing is stale)."""
    lines = []
    for name, periods in found.items():
        first = periods[0]
        spans = ", ".join(
            f"{_label(start)}..{_label(end)}" if end - start > first.grain.step else _label(start)
            for start, end in ranges(periods)
        )
        lines.append(
            f"{name}: {len(periods)} {first.grain.value}(s) stale (code {catalog.code_version(name)}): "
            f"{spans}; e.g. {first.reason}"
        )
    return "\n".join(lines)


def _label(moment) -> str:
    return f"{moment:%Y-%m-%dT%H:00Z}"


def repair_commands(lakehouse: Lakehouse, found: dict[str, list[StalePeriod]]) -> list[list[str]]:
    """The batch runs that recompute ``found``, upstream first (each table over its own ranges)."""
    commands = []
    for name, periods in found.items():  # stale_periods orders them upstream first
        spec = catalog.get(name)
        for start, end in ranges(periods):
            commands.append(
                [
                    *(sys.executable, str(JOBS_RUN), spec.task, "--mode", "batch"),
                    *("--start", _label(start), "--end", _label(end)),
                    *("--lakehouse-root", lakehouse.root),
                ]
            )
    return commands


def repair(lakehouse: Lakehouse, dry_run: bool) -> int:
    """Recompute every stale period (print the runs first); the exit code of the first run that fails."""
    found = stale(lakehouse)
    if not found:
        print("Nothing stale: every recorded period was written by today's code.")
        return 0
    print(stale_text(found))
    for command in repair_commands(lakehouse, found):
        shown = shlex.join(["jobs/run.py", *command[2:]])
        print(("would run: " if dry_run else "running: ") + shown, flush=True)
        if not dry_run:
            status = subprocess.run(command).returncode
            if status:
                print(f"failed ({status}); the tables after it were not recomputed", flush=True)
                return status
    return 0
