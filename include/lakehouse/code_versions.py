"""Which code version wrote each period of a table, and which periods an older one wrote.

A table's code version (:func:`lakehouse.catalog.code_version`) hashes what determines its
output: its own code and the versions of the tables it reads. What a run wrote with which version is kept in ``ops.code_versions`` (:func:`records`): a row per
period written, saying whether the write replaced the whole period (a backfill, a gold hour) or
added rows to it (silver's and the sessions' micro-batches). A period is stale when a version
other than today's wrote any of its rows since it was last replaced whole, or when a period of an
upstream table it is computed from is stale (:func:`stale_periods`). Spark-free: status reads
the records by delta-rs (:func:`stale`), and the repair job (:mod:`lakehouse.stale_repair`)
recomputes what it finds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from lakehouse import catalog, delta_log, object_storage
from lakehouse.catalog import TableSpec, code_version
from lakehouse.config import Lakehouse
from lakehouse.periods import Grain, Periods, as_utc

RECORDS = "ops.code_versions"


def versioned_tables() -> list[TableSpec]:
    """The tables whose periods carry a version: those addressed by period that a query computes."""
    return [
        member
        for lead in catalog.tasks()
        for member in catalog.task_members(lead)
        if member.flow.periodic
    ]


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

    A period nothing recorded (never written, or written before versions were recorded) is not
    judged: a table that has not computed a period yet holds nothing stale of it.
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
                    if (name, period) not in since_whole:
                        continue
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


def written(lakehouse: Lakehouse) -> list[Written]:
    """Every record of ``ops.code_versions`` (none before a run recorded one), read by delta-rs."""
    path = lakehouse.table(RECORDS).path
    if not delta_log.is_delta_table(path):
        return []
    columns = ["table_name", "period_start", "code_version", "whole", "written_at"]
    rows = object_storage.read_delta(path, columns).to_pylist()
    return [
        Written(**{k: as_utc(v) if isinstance(v, datetime) else v for k, v in row.items()})
        for row in rows
    ]


def stale(lakehouse: Lakehouse) -> dict[str, list[StalePeriod]]:
    """Per table, upstream first, the periods of ``lakehouse`` that today's code would compute differently."""
    return stale_periods(written(lakehouse))


def ranges(periods: list[StalePeriod]) -> list[tuple[datetime, datetime]]:
    """Contiguous runs of ``periods`` as [start, end) ranges."""
    found: list[list[datetime]] = []
    for period in sorted(periods, key=lambda p: p.period_start):
        end = period.period_start + period.grain.step
        if found and found[-1][1] == period.period_start:
            found[-1][1] = end
        else:
            found.append([period.period_start, end])
    return [(start, end) for start, end in found]


def stale_text(found: dict[str, list[StalePeriod]]) -> str:
    """One line per table: its stale periods as ranges, and why the first is stale."""
    lines = []
    for name, periods in found.items():
        first = periods[0]
        spans = ", ".join(
            _label(start) if end - start == first.grain.step else f"{_label(start)}..{_label(end)}"
            for start, end in ranges(periods)
        )
        lines.append(
            f"{name}: {len(periods)} {first.grain.value}(s) stale (its code is {code_version(name)} "
            f"now): {spans}; e.g. {first.reason}"
        )
    return "\n".join(lines)


def stale_json(found: dict[str, list[StalePeriod]]) -> dict:
    return {
        name: {
            "code_version": code_version(name),
            "periods": [
                {"start": p.grain.label(p.period_start), "reason": p.reason} for p in periods
            ],
        }
        for name, periods in found.items()
    }


def _label(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:00Z}"
