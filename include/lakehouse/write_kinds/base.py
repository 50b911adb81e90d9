"""The write kind as an object: what a table's writes mean, asked by the runner, the catalog's
checks, the Airflow assets, full refresh, recompute and status instead of branching on the kind.

A :class:`Flow` says which layout a table of its kind needs (its partitioning and the column
that names a row's period), which grains it may have, how a set of periods of such a table is
selected, what a run's summary says it wrote and where the fault harness may stop it. This
module and its kinds import no Spark (the DAG reads them at parse time); each kind's Spark code,
its ``run`` and batch ``recompute``, is a module of ``lakehouse.flows`` that the runner maps the
kind to (``lakehouse.runner.FLOW_JOBS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from lakehouse.errors import CatalogError
from lakehouse.periods import Grain, Periods

# A table's declaration (lakehouse.catalog.TableSpec), which imports this module: named, not imported.
TableSpec = Any

# Layers in the order data flows through them; ops holds the pipeline's own records.
LAYERS = ("dims", "bronze", "silver", "gold", "ops")


class Write(str, Enum):  # noqa: UP042 (str() of a member stays its name, as logs print it)
    """How a table's query writes it; :func:`lakehouse.write_kinds.flow_of` gives its flow."""

    OVERWRITE = "overwrite"  # the whole table replaced by each run (a small dimension from a file)
    APPEND = "append"  # new rows appended once per micro-batch (bronze, side outputs)
    # rows with a new key inserted, in the event periods a batch touches
    MERGE_NEW = "insert-only merge"
    # the event periods (hours, days) a batch touches recomputed from upstream and replaced
    REPLACE_PERIODS = "replace periods"
    SESSIONS = "sessions"  # a stateful query emits each session once, when the watermark closes it


@dataclass(frozen=True)
class Layout:
    """What a period-addressed table needs: its partitioning and the columns that select a period."""

    partition_by: tuple[str, ...]
    columns: tuple[str, ...]


Counts = dict[str, dict[str, int]]  # table name -> rows written, and rows replaced or updated


class Flow:
    """One write kind. Subclasses set ``kind`` and override what their kind does differently."""

    kind: Write
    # Addressed by event period: a batch over periods replaces exactly those (a backfill can run it).
    periodic = False
    # A micro-batch rewrites each period it touches whole (else it adds rows to it); a batch run
    # of a periodic kind always recomputes whole periods.
    stream_replaces_periods = False
    grains: tuple[Grain, ...] = ()  # the grains a table of this kind may declare
    # Where the fault harness may kill the flow's driver (lakehouse.faults; prefixed with the layer).
    fault_points: tuple[str, ...] = ()

    def layout(self, grain: Grain | None) -> Layout | None:
        """The partitioning and columns a table of this kind and grain must have (None: any)."""
        return None

    def predicate(self, spec: TableSpec, periods: Periods) -> str:
        """The Delta predicate that selects ``periods`` of a table of this kind."""
        raise CatalogError(f"{spec.name}: a {self.kind.value} table is not addressed by period")

    def period_of(self, spec: TableSpec, partition: dict[str, str | None]) -> datetime | None:
        """The period (UTC) of ``spec``'s grain that a data file with these partition values (as the
        Delta log writes them) holds rows of only; None when its partitioning does not tell."""
        return None

    def check(self, spec: TableSpec, where: str) -> None:
        """Fail with what to fix when ``spec`` does not fit this kind (its layout, its grain)."""
        if spec.grain is not None and spec.grain not in self.grains:
            allowed = ", ".join(g.value for g in self.grains) or "none"
            raise CatalogError(
                f"{where}: a {self.kind.value} table has no grain {spec.grain.value!r} (allowed: {allowed})"
            )
        layout = self.layout(spec.grain)
        if layout is None:
            return
        names = spec.column_names
        needed = [c for c in (*layout.partition_by, *layout.columns) if c not in names]
        if needed or spec.partition_by != layout.partition_by:
            raise CatalogError(
                f"{where}: a {self.kind.value} table of grain {spec.grain.value} must be partitioned "
                f"by {list(layout.partition_by)} and have the column(s) {list(layout.columns)} that "
                f"select whole {spec.grain.value}s (missing: {needed or 'the partitioning'})"
            )

    def counts(
        self, spec: TableSpec, summary: dict, batch: bool, sides: dict[str, str]
    ) -> tuple[Counts, set[str]]:
        """What a run's ``summary`` says it wrote: rows per table, and the tables it rewrote
        (replaced, even by nothing: they changed whatever their row counts). ``sides``: the
        names of the table's side tables by role (its quarantine, its late events)."""
        return {}, set()

    @property
    def description(self) -> str:
        return (self.__doc__ or self.kind.value).splitlines()[0]


def count(counts: Counts, name: str, rows: Any, **changed: Any) -> None:
    """Record ``rows`` written to ``name`` and any rows it replaced or updated (zeros left out)."""
    counts[name] = {"rows": rows or 0, **{k: v for k, v in changed.items() if v}}


def count_replace(counts: Counts, name: str, summary: dict) -> None:
    """A batch replace's rows written and replaced; no row figure for a job that does not count
    them (not 0: the table was replaced either way)."""
    count(counts, name, summary.get("rows_written"), rows_replaced=summary.get("rows_deleted"))
    if "rows_written" not in summary:
        del counts[name]["rows"]


def summed(summary: dict, key: str) -> int:
    """The sum of ``key`` over a run's micro-batch notes."""
    return sum(note.get(key) or 0 for note in batch_notes(summary))


def batch_notes(summary: dict) -> list[dict]:
    return [note for note in summary.get("batches") or [] if isinstance(note, dict)]
