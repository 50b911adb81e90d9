"""``lakehouse status --html FILE``: the hour grid and gold's views per campaign, as one HTML page.

For people who would rather look than read: each hour's state as a colour, the counts beside it,
each table's last write, and a line per top campaign of its views per hour. Self-contained (inline
CSS and SVG, no script, nothing fetched), so it can be mailed, attached to a ticket or opened
from a file.
"""

from __future__ import annotations

from datetime import datetime
from html import escape

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


def _colours(state: str) -> str:
    return f"background:{STATE_COLOURS[state]}" + ("; color:#fff" if state in DARK else "")


def status_page(grid, views: dict[str, dict[datetime, int]], generated_at: datetime) -> str:
    """The page: ``grid`` (a :class:`lakehouse_tools.cli.Grid`) and ``views`` (campaign -> hour -> views)."""
    head = "".join(f"<th>{escape(c)}</th>" for c in ("hour (UTC)", *grid.columns, "state"))
    body = []
    for row in grid.rows:
        cells = "".join(
            f"<td class=n>{'' if row.counts[c] is None else row.counts[c]}</td>"
            for c in grid.columns
        )
        why = escape("; ".join(row.reasons))
        body.append(
            f"<tr><td>{row.hour:%Y-%m-%d %H:00}</td>{cells}"
            f"<td class=state style='{_colours(row.state)}' title='{why}'>{row.state}</td></tr>"
        )
    writes = "".join(
        f"<tr><td>{escape(name)}</td><td class=n>{w.version if w else ''}</td>"
        f"<td>{f'{w.time:%Y-%m-%d %H:%M:%S}' if w else ''}</td><td>{escape(w.operation) if w else 'not written'}</td></tr>"
        for name, w in grid.writes.items()
    )
    flagged = "".join(
        f"<li><b>{row.hour:%Y-%m-%d %H:00} {row.state}</b>: {escape('; '.join(row.reasons))}</li>"
        for row in grid.rows
        if row.state not in ("complete", "empty")
    )
    legend = " ".join(f"<span class=key style='{_colours(s)}'>{s}</span>" for s in STATE_COLOURS)
    return f"""<!doctype html>
<html lang=en><head><meta charset=utf-8><title>lakehouse status</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 1.5em; color: #222 }}
table {{ border-collapse: collapse; margin: .5em 0 1.5em }}
th, td {{ border: 1px solid #ccc; padding: 2px 8px; white-space: nowrap }} th {{ background: #eee }}
td.n {{ text-align: right; font-variant-numeric: tabular-nums }} td.state {{ font-weight: bold }}
.key {{ padding: 1px 6px; border: 1px solid #ccc }}
</style></head><body>
<h1>lakehouse status</h1>
<p>Generated {generated_at:%Y-%m-%d %H:%M:%S} UTC. {legend}</p>
<table><tr>{head}</tr>{"".join(body) or "<tr><td>no hour holds data</td></tr>"}</table>
{f"<h2>Needs a look</h2><ul>{flagged}</ul>" if flagged else ""}
<h2>Views per hour, top campaigns (gold.campaign_hourly)</h2>
{views_chart(views)}
<h2>Last write per table</h2>
<table><tr><th>table</th><th>version</th><th>last write (UTC)</th><th>operation</th></tr>{writes}</table>
</body></html>
"""


def views_chart(views: dict[str, dict[datetime, int]], width: int = 720, height: int = 240) -> str:
    """An inline SVG: one line per campaign among the top by total views, hours along x."""
    top = sorted(views, key=lambda c: (-sum(views[c].values()), c))[:TOP_CAMPAIGNS]
    hours = sorted({hour for campaign in top for hour in views[campaign]})
    if not hours:
        return "<p>No views yet.</p>"
    peak = max(max(views[c].values()) for c in top) or 1
    left, bottom, top_pad = 50, 30, 10

    def x(hour: datetime) -> float:
        return left + (hours.index(hour) * (width - left - 10) / max(len(hours) - 1, 1))

    def y(value: int) -> float:
        return height - bottom - value * (height - bottom - top_pad) / peak

    lines = []
    for colour, campaign in zip(LINE_COLOURS, top):
        points = " ".join(f"{x(h):.1f},{y(views[campaign].get(h, 0)):.1f}" for h in hours)
        lines.append(
            f"<polyline fill=none stroke='{colour}' stroke-width=2 points='{points}'><title>{escape(campaign)}</title></polyline>"
        )
    labels = "".join(
        f"<text x='{x(h):.1f}' y='{height - 10}' font-size=10 text-anchor=middle>{h:%d %H:00}</text>"
        for h in hours[:: max(1, len(hours) // 8)]
    )
    legend = "".join(
        f"<span class=key style='border-color:{c};border-width:0 0 3px'>{escape(campaign)}</span> "
        for c, campaign in zip(LINE_COLOURS, top)
    )
    return (
        f"<svg width={width} height={height} role=img aria-label='views per hour'>"
        f"<line x1={left} y1={height - bottom} x2={width - 10} y2={height - bottom} stroke='#888'/>"
        f"<line x1={left} y1={top_pad} x2={left} y2={height - bottom} stroke='#888'/>"
        f"<text x=4 y={top_pad + 10} font-size=10>{peak}</text><text x=4 y={height - bottom} font-size=10>0</text>"
        f"{''.join(lines)}{labels}</svg><p>{legend}</p>"
    )
