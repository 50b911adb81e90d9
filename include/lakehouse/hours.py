"""Event-hour sets and intervals, and the Delta predicates that select them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from lakehouse.errors import ConfigError

HOUR = timedelta(hours=1)


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
class HourRange:
    """A set of whole event hours (UTC), e.g. the interval [start, end) of a backfill."""

    hours: tuple[datetime, ...]

    @classmethod
    def between(cls, start: datetime, end: datetime) -> HourRange:
        """The hours of [start, end); both ends must fall on whole hours."""
        start, end = as_utc(start), as_utc(end)
        for name, value in (("start", start), ("end", end)):
            if value.minute or value.second or value.microsecond:
                raise ConfigError(f"Interval {name} {value.isoformat()} is not on a whole hour")
        if end <= start:
            raise ConfigError(
                f"Empty interval: end {end.isoformat()} is not after start {start.isoformat()}"
            )
        count = int((end - start).total_seconds() // 3600)
        return cls(tuple(start + i * HOUR for i in range(count)))

    @classmethod
    def of(cls, hours) -> HourRange:
        """The distinct hours among ``hours`` (timezone-naive values are UTC), sorted."""
        return cls(tuple(sorted({as_utc(h) for h in hours})))

    def __bool__(self) -> bool:
        return bool(self.hours)

    def __str__(self) -> str:
        if not self.hours:
            return "no hours"
        return f"{len(self.hours)} hour(s) {self.hours[0]:%Y-%m-%dT%H:00Z}..{self.hours[-1]:%Y-%m-%dT%H:00Z}"

    def widened(self, hours: int) -> HourRange:
        """These hours and the ``hours`` hours before and after each."""
        return HourRange.of(h + i * HOUR for h in self.hours for i in range(-hours, hours + 1))

    def without(self, other: HourRange) -> HourRange:
        """These hours less ``other``'s."""
        return HourRange(tuple(h for h in self.hours if h not in set(other.hours)))

    def isoformats(self) -> list[str]:
        """The hours as ISO-8601 strings (for JSON: a batch's note, a task's summary)."""
        return [h.isoformat() for h in self.hours]

    def _dates(self) -> str:
        return ", ".join(sorted({f"DATE'{h:%Y-%m-%d}'" for h in self.hours}))

    def silver_predicate(self) -> str:
        """Selects these hours from a table partitioned by (event_date, event_hour)."""
        by_date: dict[str, list[int]] = {}
        for h in self.hours:
            by_date.setdefault(f"{h:%Y-%m-%d}", []).append(h.hour)
        terms = [
            f"(event_date = DATE'{day}' AND event_hour IN ({', '.join(map(str, sorted(hs)))}))"
            for day, hs in sorted(by_date.items())
        ]
        return " OR ".join(terms) if terms else "false"

    def gold_predicate(self) -> str:
        """Selects these hours from a table partitioned by event_date with an ``hour_start`` column."""
        if not self.hours:
            return "false"
        stamps = ", ".join(f"TIMESTAMP'{h:%Y-%m-%d %H:00:00}'" for h in self.hours)
        return f"event_date IN ({self._dates()}) AND hour_start IN ({stamps})"

    def sessions_predicate(self) -> str:
        """Selects the sessions that overlap these hours (first to last) from a sessions table."""
        if not self.hours:
            return "false"
        first, after = self.hours[0], self.hours[-1] + HOUR
        return (
            f"session_end >= TIMESTAMP'{first:%Y-%m-%d %H:00:00}' "
            f"AND session_start < TIMESTAMP'{after:%Y-%m-%d %H:00:00}'"
        )
