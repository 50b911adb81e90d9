"""Which code version wrote each period of a table, and which periods an older one wrote.

A table's code version (:func:`lakehouse.catalog.code_version`) hashes what determines its
output: its own code and the versions of the tables it reads. What a run wrote with which version is kept in ``ops.code_versions`` (:func:`records`): a row per
period written, saying whether the write replaced the whole period (a backfill, a gold hour) or
added rows to it (silver's and the sessions' micro-batches). A period is stale when a version
other than today's wrote any of its rows since it was last replaced whole, or when a period of an
upstream table it is computed from is stale (:func:`stale_periods`). Spark-free: status reads it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from lakehouse import catalog
from lakehouse.catalog import TableSpec, code_version
from lakehouse.periods import Grain, Periods, as_utc

RECORDS = "ops.code_versions"


def versioned_tables() -> list[TableSpec]:
    """The tables whose periods carry a version: those addressed by period with a query of their own."""
    return [spec for spec in catalog.tasks() if spec.flow.periodic]


# --------------------------------------------------------------------------------------------
# What wrote each period


@dataclass(frozen=True)
class Written:
    """A run wrote rows of one period of a table with one code version."""

    table_name: str
    period_start: datetime  # UTC
    code_version: str
    whole: bool  # the period was replaced whole (else rows were added to it)
    written_at: datetime


def records(
    spec: TableSpec,
    periods: Iterable[datetime],
    *,
    batch: bool,
    run: str | None,
    now: datetime | None = None,
) -> list[dict]:
    """The ``ops.code_versions`` rows of one run that wrote ``periods`` of ``spec`` with today's
    code; ``batch``: a batch run, which recomputes each period whole."""
    now = now or datetime.now(UTC)
    version = code_version(spec.name)
    whole = batch or spec.flow.stream_replaces_periods
    return [
        {
            "table_name": spec.name,
            "period_start": as_utc(start),
            "grain": spec.grain.value,
            "code_version": version,
            "whole": whole,
            "written_at": now,
            "airflow_run_id": run,
        }
        for start in sorted(periods)
    ]


@dataclass(frozen=True)
class StalePeriod:
    """A period of a table whose content is not what today's code computes, and why."""

    table_name: str
    period_start: datetime
    grain: Grain
    reason: str


def stale_periods(
    written: Iterable[Written], current: dict[str, str] | None = None
) -> dict[str, list[StalePeriod]]:
    """Per table (upstream first), its stale periods: written since their last whole write by a
    version other than ``current`` (default: today's), or computed from an upstream period that is.

    A period nothing recorded (written before versions were recorded) is not judged.
    """
    specs = {spec.name: spec for spec in versioned_tables()}
    current = current or {name: code_version(name) for name in specs}
    since_whole: dict[tuple[str, datetime], set[str]] = {}
    for row in sorted(written, key=lambda r: r.written_at):
        key = (row.table_name, as_utc(row.period_start))
        if row.whole or key not in since_whole:
            since_whole[key] = set()
        since_whole[key].add(row.code_version)
    stale: dict[str, dict[datetime, str]] = {}
    for name, spec in specs.items():  # upstream first: an upstream table is judged before
        mine = stale.setdefault(name, {})
        for (table_name, start), versions in since_whole.items():
            if table_name == name and versions != {current[name]}:
                old = ", ".join(sorted(versions - {current[name]}))
                mine[start] = f"written by version {old}; the code is {current[name]} now"
        for upstream in spec.upstream:
            upstream_grain = specs[upstream].grain if upstream in specs else Grain.HOUR
            for start in sorted(stale.get(upstream, {})):
                for period in Periods.of([start], upstream_grain).to(spec.grain):
                    mine.setdefault(
                        period, f"computed from {upstream}, stale at {upstream_grain.label(start)}"
                    )
    return {
        name: [
            StalePeriod(name, start, specs[name].grain, reason)
            for start, reason in sorted(periods.items())
        ]
        for name, periods in stale.items()
        if periods
    }


def period_end(period: StalePeriod) -> datetime:
    """Where a stale period ends (exclusive)."""
    return period.period_start + period.grain.step
