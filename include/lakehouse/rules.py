"""Data-quality rules as declared beside a table (``expect=[...]``); :mod:`lakehouse.expectations` checks them."""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse.errors import CatalogError

# The comparisons a rule's measure can be held to.
COMPARISONS = ("<=", ">=", "!=", "=", "<", ">")


@dataclass(frozen=True)
class Expectation:
    """A data-quality rule: ``measure`` (a SQL aggregate) over a table's rows must satisfy ``holds``.

    Measured per event hour (``per="hour"``) over the hours a run wrote, or per micro-batch
    (``per="batch"``, tables with a ``batch_id`` column) over the run's batches. ``on_failure``:
    ``warn`` records and logs; ``fail`` also fails the task, so nothing downstream is computed from
    the hour (see :mod:`lakehouse.expectations`).
    """

    rule: str  # what should hold, in words: the name in results, logs and messages
    measure: str  # e.g. count_if(campaign_id IS NULL)
    holds: str  # e.g. "= 0", "<= 0.05"
    on_failure: str = "fail"
    per: str = "hour"
    # How the table's file statistics answer the measure, when they can: ("nulls", (column,)) or
    # ("negatives", columns). Set by :func:`expect_no_nulls` and :func:`expect_not_negative`.
    from_stats: tuple[str, tuple[str, ...]] | None = None

    @property
    def bound(self) -> tuple[str, float]:
        """The comparison and the number of ``holds``."""
        text = self.holds.strip()
        for op in COMPARISONS:
            if text.startswith(op):
                try:
                    return op, float(text[len(op) :])
                except ValueError:
                    break
        raise CatalogError(
            f"Rule {self.rule!r}: holds={self.holds!r} is not '<op> <number>' with op one of {COMPARISONS}"
        )

    def passes(self, observed: float | None) -> bool:
        """Whether a measured value satisfies the rule (nothing measured, e.g. no lines: it holds)."""
        if observed is None:
            return True
        op, number = self.bound
        return {
            "<=": observed <= number,
            ">=": observed >= number,
            "!=": observed != number,
            "=": observed == number,
            "<": observed < number,
            ">": observed > number,
        }[op]


class ExpectationFailed(RuntimeError):
    """A ``fail`` rule does not hold: the task stops, so nothing downstream is computed from the hour."""


def expect(
    rule: str, measure: str, holds: str, *, on_failure: str = "fail", per: str = "hour"
) -> Expectation:
    """A rule for a declaration's ``expect=[...]``, e.g. ``expect("every event has a campaign", "count_if(campaign_id IS NULL)", "= 0")``."""
    return Expectation(rule, measure, holds, on_failure, per)


def expect_no_nulls(rule: str, column: str, *, on_failure: str = "fail") -> Expectation:
    """``count_if(column IS NULL) = 0``, per hour; measured from the null counts the Delta log keeps
    for each file when every file of the hour has them (no Spark job), by Spark otherwise."""
    return Expectation(
        rule, f"count_if({column} IS NULL)", "= 0", on_failure, "hour", ("nulls", (column,))
    )


def expect_not_negative(rule: str, *columns: str, on_failure: str = "fail") -> Expectation:
    """``count_if(a < 0 OR b < 0 ...) = 0``, per hour; 0 from the Delta log when every file of the
    hour has a minimum of at least 0 for each column (no Spark job), measured by Spark otherwise."""
    measure = f"count_if({' OR '.join(f'{c} < 0' for c in columns)})"
    return Expectation(rule, measure, "= 0", on_failure, "hour", ("negatives", columns))
