"""``lakehouse status --html FILE``: the hour grid and gold's views per campaign, as one HTML page.

For people who would rather look than read: each hour's state as a colour, the counts beside it,
each table's last write, and a line per top campaign of its views per hour. Self-contained (inline
CSS and SVG, no script, nothing fetched), so it can be mailed, attached to a ticket or opened
from a file. The page is the Jinja2 template ``templates/status_page.html.j2``; this module
computes the chart's coordinates.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache

STATE_COLOURS = {
    "mismatch": "#b2182b",
    "failed": "#d6604d",
    "missing": "#ef8a62",
    "stale": "#fddbc7",
    "pending": "#d1e5f0",
    "complete": "#67a9cf",
    "empty": "#f7f7f7",
}
DARK = {"mismatch", "failed"}  # states whose colour needs white text to be read
LINE_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e")
TOP_CAMPAIGNS = len(LINE_COLOURS)


@cache
def _template():
    from jinja2 import Environment, PackageLoader, StrictUndefined

    environment = Environment(
        loader=PackageLoader("lakehouse_tools", "templates"),
        autoescape=True,
        undefined=StrictUndefined,  # a misspelt name fails the page instead of leaving a blank
    )
    return environment.get_template("status_page.html.j2")


def status_page(
    grid,
    views: dict[str, dict[datetime, int]],
    generated_at: datetime,
    old_code: dict | None = None,
) -> str:
    """The page: ``grid`` (a :class:`lakehouse_tools.status.Grid`), ``views`` (campaign -> hour ->
    views) and ``old_code``, the periods older code wrote (:func:`lakehouse.code_versions.stale`):
    each such hour's count is marked, with why in its tooltip, and listed below the grid."""
    from lakehouse import code_versions

    old_code = old_code or {}
    return _template().render(
        grid=grid,
        flagged=[row for row in grid.rows if row.state not in ("complete", "empty")],
        chart=views_chart(views),
        colours=STATE_COLOURS,
        dark=DARK,
        generated_at=generated_at,
        old_cells={
            (name, period.period_start.replace(tzinfo=None)): period.reason
            for name, periods in old_code.items()
            for period in periods
        },
        old_code=code_versions.stale_text(old_code).splitlines() if old_code else [],
    )


def views_chart(
    views: dict[str, dict[datetime, int]], width: int = 720, height: int = 240
) -> dict | None:
    """The SVG chart's geometry: one line per campaign among the top by total views, hours along x
    (None: no views)."""
    top = sorted(views, key=lambda c: (-sum(views[c].values()), c))[:TOP_CAMPAIGNS]
    hours = sorted({hour for campaign in top for hour in views[campaign]})
    if not hours:
        return None
    peak = max(max(views[c].values()) for c in top) or 1
    left, bottom, top_pad = 50, 30, 10

    def x(hour: datetime) -> str:
        return f"{left + hours.index(hour) * (width - left - 10) / max(len(hours) - 1, 1):.1f}"

    def y(value: int) -> str:
        return f"{height - bottom - value * (height - bottom - top_pad) / peak:.1f}"

    return {
        "width": width,
        "height": height,
        "left": left,
        "right": width - 10,
        "top": top_pad,
        "axis_y": height - bottom,
        "peak": peak,
        "lines": [
            {
                "colour": colour,
                "campaign": campaign,
                "legend": f"#{rank} {short_id(campaign)}: {sum(views[campaign].values()):,} views",
                "points": " ".join(f"{x(h)},{y(views[campaign].get(h, 0))}" for h in hours),
            }
            for rank, (colour, campaign) in enumerate(zip(LINE_COLOURS, top), start=1)
        ],
        "labels": [
            # The last label ends at the axis' end: centred there, half of it fell off the chart.
            {"x": x(hours[i]), "text": f"{hours[i]:%d %H:00}", "anchor": anchor}
            for i, anchor in label_positions(len(hours))
        ],
    }


def short_id(campaign: str) -> str:
    """A campaign id as a legend shows it: a UUID's first 8 characters (as a short Git hash), the
    whole id in the entry's tooltip."""
    return f"{campaign[:8]}…" if len(campaign) > 12 else campaign


def label_positions(count: int, at_most: int = 8) -> list[tuple[int, str]]:
    """Which of ``count`` hours get an axis label, and its text anchor: about ``at_most`` evenly
    spaced, the last hour always (ending at the axis' end), none crowding it."""
    step = max(1, -(-count // at_most))
    chosen = list(range(0, count, step))
    if chosen[-1] != count - 1:
        if len(chosen) > 1:
            chosen.pop()  # closer than a step to the last hour's label: they would overlap
        chosen.append(count - 1)
    return [(i, "end" if i == count - 1 and count > 1 else "middle") for i in chosen]
