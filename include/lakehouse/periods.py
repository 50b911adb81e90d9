"""Time grains and sets of whole periods (UTC): an hour table's hours, a day table's days.

A table with event time declares a grain (:class:`Grain`): the period its rows are written and
replaced by. Whatever addresses a table in event time (a stream's touched rows, a backfill's
interval, the consistency check, repair, status) speaks in :class:`Periods` of the table's grain:
an hour touched in a day table widens to its whole day (``periods.to(Grain.DAY)``), and reading
that day from an hour table expands it back to its 24 hours (``periods.to(Grain.HOUR)``). A
week or month grain is one more member with its own ``floor`` and ``step``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum

from lakehouse.errors import ConfigError

HOUR = timedelta(hours=1)


class Grain(str, Enum):  # noqa: UP042 (str() of a member stays its value in messages)
    """The period a table's rows belong to and are replaced by."""

    HOUR = "hour"
    DAY = "day"

    @property
    def step(self) -> timedelta:
        return HOUR if self is Grain.HOUR else timedelta(days=1)

    def floor(self, moment: datetime) -> datetime:
        """The start of the period holding ``moment`` (UTC)."""
        moment = as_utc(moment)
        if self is Grain.HOUR:
            return moment.replace(minute=0, second=0, microsecond=0)
        return moment.replace(hour=0, minute=0, second=0, microsecond=0)

    @property
    def column(self) -> str:
        """The column of a replaced table that names a row's period (its replace predicate's)."""
        return "hour_start" if self is Grain.HOUR else "event_date"

    @property
    def label_format(self) -> str:
        """How a period is shown to people and keyed in Airflow partitions (UTC)."""
        return "%Y-%m-%dT%H:00Z" if self is Grain.HOUR else "%Y-%m-%d"

    def label(self, start: datetime) -> str:
        return f"{start:{self.label_format}}"


def as_utc(value: datetime) -> datetime:
    """A plain ``datetime`` in UTC (Airflow passes pendulum datetimes, whose arithmetic differs)."""
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromtimestamp(value.timestamp(), tz=UTC)


def parse_instant(value: str) -> datetime:
    """An ISO-8601 instant (``2026-11-20T13:00Z``; UTC when no offset is given)."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as error:
        raise ConfigError(
            f"Not an ISO-8601 time: {value!r} (expected e.g. 2026-11-20T13:00Z)"
        ) from error
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


@dataclass(frozen=True)
class Periods:
    """A sorted set of whole periods of one grain (UTC), e.g. the interval [start, end) of a backfill."""

    starts: tuple[datetime, ...] = ()
    grain: Grain = Grain.HOUR

    @classmethod
    def between(cls, start: datetime, end: datetime, grain: Grain = Grain.HOUR) -> Periods:
        """The periods of [start, end); both ends must fall on whole periods of ``grain``."""
        start, end = as_utc(start), as_utc(end)
        for name, value in (("start", start), ("end", end)):
            if value != grain.floor(value):
                raise ConfigError(
                    f"Interval {name} {value.isoformat()} is not on a whole {grain.value}"
                )
        if end <= start:
            raise ConfigError(
                f"Empty interval: end {end.isoformat()} is not after start {start.isoformat()}"
            )
        count = int((end - start) / grain.step)
        return cls(tuple(start + i * grain.step for i in range(count)), grain)

    @classmethod
    def of(cls, moments, grain: Grain = Grain.HOUR) -> Periods:
        """The distinct periods of ``grain`` holding ``moments`` (timezone-naive values are UTC), sorted."""
        return cls(tuple(sorted({grain.floor(m) for m in moments})), grain)

    def __bool__(self) -> bool:
        return bool(self.starts)

    def __len__(self) -> int:
        return len(self.starts)

    def __iter__(self):
        return iter(self.starts)

    @property
    def first(self) -> datetime:
        return self.starts[0]

    @property
    def end(self) -> datetime:
        """The end of the last period (exclusive)."""
        return self.starts[-1] + self.grain.step

    def __str__(self) -> str:
        if not self.starts:
            return f"no {self.grain.value}s"
        first, last = self.grain.label(self.starts[0]), self.grain.label(self.starts[-1])
        span = first if len(self) == 1 else f"{first}..{last}"
        return f"{len(self)} {self.grain.value}(s) {span}"

    def to(self, grain: Grain) -> Periods:
        """The same time in ``grain``: coarser periods hold these (an hour widens to its day);
        finer ones cover them (a day is its 24 hours)."""
        if grain is self.grain:
            return self
        if grain.step > self.grain.step:
            return Periods.of(self.starts, grain)
        per = int(self.grain.step / grain.step)
        return Periods(tuple(s + i * grain.step for s in self.starts for i in range(per)), grain)

    def hours(self) -> Periods:
        """These periods as hours."""
        return self.to(Grain.HOUR)

    def widened(self, periods: int) -> Periods:
        """These periods and the ``periods`` periods before and after each."""
        step = self.grain.step
        return Periods.of(
            (s + i * step for s in self.starts for i in range(-periods, periods + 1)), self.grain
        )

    def without(self, other: Periods) -> Periods:
        """These periods less those ``other`` touches (in this grain; linear: one set, not one
        per period)."""
        dropped = set(other.to(self.grain).starts)
        return Periods(tuple(s for s in self.starts if s not in dropped), self.grain)

    def isoformats(self) -> list[str]:
        """The period starts as ISO-8601 strings (for JSON: a batch's note, a task's summary)."""
        return [s.isoformat() for s in self.starts]

    def dates(self) -> list[str]:
        """The distinct UTC dates these periods fall on, as SQL date literals."""
        return sorted({f"DATE'{s:%Y-%m-%d}'" for s in self.starts})
