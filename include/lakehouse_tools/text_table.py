"""Rows as an aligned text table (tabulate lays it out), optionally cut to fit a terminal's width.

Numbers are right-aligned, everything else left-aligned; a column of strings that look like
numbers (ids) stays text. To fit a width, the long columns are cut (a cut value ends in "…"),
down to a few characters each, short ones (times, numbers) kept whole; if even that is too wide,
the last columns are left out and named, so a wide table (``select * from silver.ad_events``) still reads one row per line.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import tabulate as _tabulate
from tabulate import tabulate

CUT = "…"
NARROWEST = 8  # a cut column keeps at least this many characters (fewer only if it is narrower)
WHOLE = 20  # a column this narrow (a timestamp to the second) is never cut
GAP = 2  # the "simple" format's spaces between columns


def cell(value) -> str:
    """A value as shown in a table: timestamps to the minute (or second), floats in 6 digits."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return (
            value.strftime("%Y-%m-%d %H:%M:%S")
            if value.second or value.microsecond
            else value.strftime("%Y-%m-%d %H:%M")
        )
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value).replace("\n", "\\n")


def _numeric(rows: list[tuple], column: int) -> bool:
    values = [row[column] for row in rows if row[column] is not None]
    return bool(values) and all(
        isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) for v in values
    )


def _layout(headers: list[str], cells: list[list[str]], numeric: list[bool]) -> str:
    return tabulate(
        cells,
        headers=headers,
        tablefmt="simple",
        disable_numparse=True,  # the values are already formatted; "007" is an id, not 7
        colalign=["right" if n else "left" for n in numeric],
    )


def table_text(columns: list[str], rows: list[tuple]) -> str:
    """``rows`` under ``columns``, aligned, every value whole."""
    cells = [[cell(v) for v in row] for row in rows]
    return _layout(list(columns), cells, [_numeric(rows, i) for i in range(len(columns))])


def fitted_table_text(columns: list[str], rows: list[tuple], width: int) -> tuple[str, list[str]]:
    """``rows`` under ``columns`` in lines of at most ``width`` characters; and the columns left out."""
    cells = [[cell(v) for v in row] for row in rows]
    # tabulate pads a header by MIN_PADDING: a column is as wide as its widest value or that.
    padding = _tabulate.MIN_PADDING
    natural = [
        max([len(name) + padding, *(len(row[i]) for row in cells)])
        for i, name in enumerate(columns)
    ]
    widths = _fit(natural, width)
    shown = range(len(widths))
    headers = [_cut(columns[i], widths[i] - padding) for i in shown]
    cut = [[_cut(row[i], widths[i]) for i in shown] for row in cells]
    text = _layout(headers, cut, [_numeric(rows, i) for i in shown])
    return text, list(columns[len(widths) :])


def _fit(natural: list[int], width: int) -> list[int]:
    """Column widths within ``width`` (GAP between columns): the long columns are narrowed, evenly,
    down to NARROWEST; a short one (a time, a number) stays whole; the columns that still do not
    fit are dropped from the end (a cut time or number would mislead)."""

    def total(widths: list[int]) -> int:
        return sum(widths) + GAP * (len(widths) - 1)

    floors = [n if n <= WHOLE else NARROWEST for n in natural]
    kept = len(natural)
    while kept > 1 and total(floors[:kept]) > width:
        kept -= 1
    natural, floors = natural[:kept], floors[:kept]
    room = width - GAP * (kept - 1)
    if sum(natural) <= room:
        return natural

    def widths(cap: int) -> list[int]:
        return [min(n, max(f, cap)) for n, f in zip(natural, floors)]

    # The largest cap whose widths fit (a column never narrower than its floor).
    low, high = 0, max(natural)
    while low < high:
        middle = (low + high + 1) // 2
        if sum(widths(middle)) <= room:
            low = middle
        else:
            high = middle - 1
    fitted = widths(low)
    if sum(fitted) > room:  # one column, wider than the screen even at its floor
        fitted = [max(room, 1)]
    return fitted


def _cut(text: str, width: int) -> str:
    width = max(width, 1)
    return text if len(text) <= width else text[: width - 1] + CUT
