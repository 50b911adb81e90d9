"""The verdict on a lakehouse after the kills: every row exactly once, against independent figures.

Bronze must hold every landing line exactly once, silver every valid event exactly once, the
quarantine the oracle's count per reason (:mod:`lakehouse_tools.oracle`, plain Python from the
raw lines), a metrics table one row per committed batch, and each gold table the oracle's rows.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from lakehouse import catalog
from lakehouse.config import Lakehouse
from lakehouse_tools.fault_harness.checkpoint_state import batch_ids
from lakehouse_tools.fault_harness.plan import TARGETS
from lakehouse_tools.oracle import Expected, expected_from_landing

# What a table may show besides its row counts; any of them above 0 fails the trial.
PROBLEMS = ("lost", "duplicated", "unexpected", "mismatched")
# The per-batch records of a query (silver's ops.silver_batch_metrics): one row per micro-batch.
METRICS_TABLES = tuple(t.name for t in catalog.tables() if t.role == "metrics")
CHECKED_TABLES = (*(name for targets in TARGETS.values() for name in targets), *METRICS_TABLES)


def landing_file_lines(path: Path) -> list[str]:
    """A landing file's lines, as the oracle reads them."""
    return path.read_bytes().decode("utf-8", errors="replace").splitlines()


def _landing_key(source_file: str, landing_root: str) -> str:
    """A bronze row's landing file relative to the landing folder (file names repeat across hours)."""
    path = source_file.removeprefix("file:")
    marker = landing_root.rstrip("/") + "/"
    return path.split(marker, 1)[1] if marker in path else path


def check_tables(spark, lakehouse: Lakehouse) -> dict[str, dict[str, int]]:
    """Rows lost, duplicated, unexpected or wrong per table, against the landing files and the oracle."""
    read = lambda name: spark.read.format("delta").load(lakehouse.table(name).path)  # noqa: E731
    landing = Path(lakehouse.landing_events)
    expected: Expected = expected_from_landing(
        lakehouse.landing_events, lakehouse.landing_campaigns
    )
    figures: dict[str, dict[str, int]] = {}

    want = Counter(
        (str(path.relative_to(landing)), line)
        for path in sorted(landing.rglob("*.jsonl"))
        for line in landing_file_lines(path)
    )
    got = Counter(
        (_landing_key(row.source_file, lakehouse.landing_events), row.raw_line)
        for row in read("bronze.ad_events").select("source_file", "raw_line").collect()
    )
    surplus = got - want
    figures["bronze.ad_events"] = {
        "expected": sum(want.values()),
        "rows": sum(got.values()),
        "lost": sum((want - got).values()),
        "duplicated": sum(n for key, n in surplus.items() if key in want),
        "unexpected": sum(n for key, n in surplus.items() if key not in want),
    }

    ids = [row.event_id for row in read("silver.ad_events").select("event_id").collect()]
    unique = set(ids)
    figures["silver.ad_events"] = {
        "expected": len(expected.events),
        "rows": len(ids),
        "lost": len(set(expected.events) - unique),
        "duplicated": len(ids) - len(unique),
        "unexpected": len(unique - set(expected.events)),
    }

    per_reason = read("silver.quarantine_ad_events").groupBy("reason").count().collect()
    reasons = {row.reason: row["count"] for row in per_reason}
    wanted = Counter(expected.quarantined)
    figures["silver.quarantine_ad_events"] = {
        "expected": sum(wanted.values()),
        "rows": sum(reasons.values()),
        "lost": sum((wanted - Counter(reasons)).values()),
        # More rows of a reason than the oracle has: counted as duplicates (a misclassified line
        # would also show as one lost under its right reason).
        "duplicated": sum((Counter(reasons) - wanted).values()),
    }

    # A query's per-batch records: one row per committed micro-batch of the current checkpoint
    # generation (a batch whose metrics row is missing is "lost"), and together they account for
    # every line the query read, every row it inserted and every line it quarantined.
    for name in METRICS_TABLES:
        writer = catalog.get(catalog.get(name).written_by)
        paths = lakehouse.table(writer.name)
        generation = paths.current_generation()
        rows = read(name).where(f"generation = {generation}").collect()
        batches = batch_ids(Path(paths.checkpoint(generation)) / "commits")
        seen = Counter(row.batch_id for row in rows)
        totals = {
            "lines": read(writer.upstream[0]).count(),
            "inserted": read(writer.name).count(),
            "quarantined": read(catalog.side(writer, "quarantine").name).count(),
        }
        figures[name] = {
            "expected": len(batches),
            "rows": len(rows),
            "lost": len(batches - seen.keys()),
            "duplicated": sum(n - 1 for n in seen.values()),
            "unexpected": len(seen.keys() - batches),
            "mismatched": sum(
                any(row[column] is None for row in rows)
                or sum(row[column] for row in rows) != total
                for column, total in totals.items()
            ),
        }

    # Gold tables: whole rows against the oracle's (a wrong value counts as one lost and one unexpected row).
    for table in catalog.tables():
        if table.layer != "gold":
            continue
        columns = table.column_names
        wanted = Counter(tuple(row[c] for c in columns) for row in expected.rows(table.name))
        actual = Counter(tuple(row) for row in read(table.name).select(*columns).collect())
        surplus = actual - wanted
        figures[table.name] = {
            "expected": sum(wanted.values()),
            "rows": sum(actual.values()),
            "lost": sum((wanted - actual).values()),
            "duplicated": sum(n for row, n in surplus.items() if row in wanted),
            "unexpected": sum(n for row, n in surplus.items() if row not in wanted),
            "mismatched": 0,
        }
    return figures
