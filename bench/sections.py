"""What every benchmark leaves behind: its results file and its keys of summary.json.

A benchmark saves what it measured as ``bench/results/<benchmark>.json`` (:func:`save_results`)
and updates its keys of ``bench/results/summary.json`` (a flat JSON object of medians), leaving
every other benchmark's file and keys as they are. BENCHMARKS.md is then rendered from those files
alone (``make benchmarks-md``, :mod:`bench.render`): rendering never reruns a benchmark.

A results file holds ``results`` (what the benchmark's ``render`` reads) or, for a benchmark that
renders its own Markdown, that ``section``; and ``catalog``, the tables the catalog declared when
it was measured, so the report can say which of today's tables a figure leaves out.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
RESULTS = PROJECT_DIR / "bench" / "results"
SUMMARY = "summary.json"


def markers(script: str) -> tuple[str, str]:
    """The comments that open and close ``script``'s section (e.g. ``bench/engine_compare.py``)."""
    return f"<!-- {script}: begin -->", f"<!-- {script}: end -->"


def declared_tables() -> list[str]:
    """The tables the catalog declares now."""
    from lakehouse import catalog

    return [spec.name for spec in catalog.tables()]


def update_summary(path: Path, figures: dict) -> None:
    """Update one benchmark's keys of a flat JSON object, keeping every other key."""
    current = json.loads(path.read_text()) if path.exists() else {}
    current.update(figures)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")


def save_results(
    benchmark: str,
    results_dir: Path,
    *,
    results: dict | None = None,
    section: str | None = None,
    figures: dict | None = None,
    catalog: list[str] | None = None,
) -> Path:
    """Write ``results_dir/<benchmark>.json`` and ``benchmark``'s ``figures`` into its summary.json."""
    figures = figures or {}
    saved = {
        "benchmark": benchmark,
        "saved_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "catalog": catalog if catalog is not None else declared_tables(),
        "summary_keys": sorted(figures),
    }
    if results is not None:
        saved["results"] = results
    if section is not None:
        saved["section"] = section
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{benchmark}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(saved, indent=1, default=str) + "\n")
    os.replace(tmp, path)
    if figures:
        update_summary(results_dir / SUMMARY, figures)
    return path
