"""A job's summary as a few short lines for the task log (the JSON summary stays the task's XCom).

What a person looks for first: rows in, valid, duplicates, inserted, quarantined by reason, the
hours written and how long it took. A figure the job did not report is left out, never shown as
``None``.
"""

from __future__ import annotations

from typing import Any

from lakehouse_airflow.assets import period_strings


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _by_reason(notes: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for note in notes:
        for reason, count in (note.get("quarantined_by_reason") or {}).items():
            counts[reason] = counts.get(reason, 0) + (count or 0)
    return counts


def headline(name: str, summary: dict) -> str:
    """One line: what the run read and what it did with it."""
    notes = [n for n in summary.get("batches") or [] if isinstance(n, dict)]
    parts = []
    if summary.get("mode") == "batch":
        parts.append(f"batch over {summary.get('hours') or 'its hours'}")
    replayed = (summary.get("quarantine_replay") or {}).get("lines")
    accepted = (
        f"; {_n(replayed)} quarantined line(s) now accepted (upstream changed)" if replayed else ""
    )
    if summary.get("not_started"):
        return f"{name}: nothing new ({summary['not_started']}){accepted}"
    if "input_rows" in summary:
        parts.append(
            f"{_n(summary['input_rows'])} row(s) in, {_n(summary.get('micro_batches', 0))} micro-batch(es)"
        )
    if any("lines" in n for n in notes):
        figures = [f"{_n(sum(n.get('valid_lines') or 0 for n in notes))} valid"]
        duplicates = [
            n.get(k)
            for n in notes
            for k in ("duplicates_in_batch", "duplicates_of_earlier_batches")
            if n.get(k) is not None
        ]
        if duplicates:
            figures.append(f"{_n(sum(duplicates))} duplicate(s)")
        if any(n.get("inserted") is not None for n in notes):
            figures.append(f"{_n(sum(n.get('inserted') or 0 for n in notes))} inserted")
        reasons = _by_reason(notes)
        quarantined = sum(n.get("quarantined") or 0 for n in notes)
        detail = ", ".join(f"{r} {_n(c)}" for r, c in sorted(reasons.items()))
        figures.append(f"{_n(quarantined)} quarantined" + (f" ({detail})" if detail else ""))
        parts.append(", ".join(figures))
    for key, label in (
        ("rows_written", "row(s) written"),
        ("rows_deleted", "replaced"),
        ("sessions", "session(s) closed"),
        ("quarantine_resolved", "quarantined line(s) now accepted"),
    ):
        if summary.get(key) is None:
            continue
        if key == "rows_written" and summary[key] == summary.get("input_rows"):
            continue  # said once: every row read was written
        parts.append(f"{_n(summary[key])} {label}")
    if isinstance(summary.get("expectations"), dict):
        checked = summary["expectations"]
        failed = checked.get("failed_warn") or []
        parts.append(
            f"{_n(checked.get('checked') or 0)} rule check(s)"
            + (f", {len(failed)} warning(s)" if failed else "")
        )
    return (f"{name}: " + "; ".join(parts) if parts else f"{name}: done") + accepted


def summary_lines(
    name: str, summary: Any, written: dict[str, dict] | None = None, seconds: float | None = None
) -> list[str]:
    """The summary for people: a headline, then one line per table written (rows and event periods)."""
    if isinstance(summary, list):  # maintenance: one record per operation
        return [f"{name}: {len(summary)} maintenance record(s)"] + (
            [f"{name}: {seconds:.1f} s"] if seconds is not None else []
        )
    if not isinstance(summary, dict):
        return []
    # a query of several tables is its task's; one table's, the table's
    lines = [headline(name if "tables" in summary else summary.get("table") or name, summary)]
    for table, extra in (written or {}).items():
        replaced = "".join(
            f", {_n(extra[key])} {label}"
            for key, label in (("rows_replaced", "replaced"), ("rows_updated", "updated"))
            if extra.get(key)
        )
        grain = extra.get("grain") or "hour"
        periods = (
            f"; event {grain}s {period_strings(extra['periods'], grain)}"
            if extra.get("periods")
            else ""
        )
        rows = f"{_n(extra['rows'])} row(s)" if "rows" in extra else f"its {grain}s replaced"
        lines.append(f"  wrote {table}: {rows}{replaced}{periods}")
    if written is not None and not written:
        lines.append("  wrote nothing")
    if seconds is not None:
        lines.append(f"  {seconds:.1f} s")
    return lines
