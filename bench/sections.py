"""What every benchmark writes besides its own results: its section of BENCHMARKS.md and its keys of summary.json.

A benchmark owns the text between its two marker comments in BENCHMARKS.md (its section, rendered
from its results) and its keys of ``bench/results/summary.json`` (a flat JSON object of medians);
rerunning it replaces those and leaves every other benchmark's section and keys as they are.
"""

from __future__ import annotations

import json
from pathlib import Path


def markers(script: str) -> tuple[str, str]:
    """The begin and end comments around the section of ``script`` (e.g. ``bench/engine_compare.py``)."""
    return f"<!-- {script}: begin -->", f"<!-- {script}: end -->"


def replace_section(path: Path, section: str, begin: str, end: str) -> None:
    """Put ``section`` (which starts with ``begin`` and ends with ``end``) in place of the text between them in ``path``.

    Appended at the end when the markers are absent.
    """
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section.rstrip("\n") + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def update_summary(path: Path, figures: dict) -> None:
    """Update one benchmark's keys of a flat JSON object, keeping every other key."""
    current = json.loads(path.read_text()) if path.exists() else {}
    current.update(figures)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")


def publish(section: str, out: str | None, summary: str | None, figures: dict) -> None:
    """Print a benchmark's section; put it in the Markdown file ``out`` and its figures in ``summary`` when given."""
    print(section)
    begin, end = section.splitlines()[0], section.rstrip("\n").splitlines()[-1]
    if out:
        replace_section(Path(out), section, begin, end)
    if summary:
        update_summary(Path(summary), figures)
