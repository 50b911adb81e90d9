"""Figures computed from the measurements: end-to-end time, throughput per layer, cost growth, query splits."""

from __future__ import annotations

import statistics

from bench.ysb.measuring import summary
from bench.ysb.tasks import PIPELINE, STREAMED, label


def ratio_summary(numerators: list[float], denominators: list[float]) -> dict:
    """Per-repetition ratios (the runs of one repetition ran side by side), summarised."""
    return summary([n / d for n, d in zip(numerators, denominators) if d])


def e2e(run: dict, names=PIPELINE) -> float:
    """Wall seconds of the tasks ``names`` in one run (default: the whole pipeline)."""
    return sum(run["seconds"].get(name, 0.0) for name in names)


def throughput_rows(pipeline: dict) -> list[dict]:
    """Per streamed task and end to end: wall seconds and events/s/core of the incremental and batch runs."""
    lines, cores = pipeline["dataset"]["lines"], pipeline["cores"]
    rows = []
    for layer in (*STREAMED, "end to end"):
        row = {"layer": label(layer), "task": layer}
        for kind in ("incremental", "batch"):
            runs = pipeline["runs"][kind]
            secs = [e2e(r) if layer == "end to end" else r["seconds"].get(layer) for r in runs]
            row[kind] = summary(secs)
            row[f"{kind}_eps_core"] = summary([lines / s / cores for s in secs if s])
        inc = [
            e2e(r) if layer == "end to end" else r["seconds"][layer]
            for r in pipeline["runs"]["incremental"]
        ]
        bat = [
            e2e(r) if layer == "end to end" else r["seconds"][layer]
            for r in pipeline["runs"]["batch"]
        ]
        row["ratio"] = ratio_summary(inc, bat)
        rows.append(row)
    return rows


def growth_figures(growth: dict, window: int = 5) -> dict:
    """Wall seconds per hourly run; first vs last runs (run 1 also creates the tables, so 2.. is the baseline)."""
    totals = [e2e(run, STREAMED) for run in growth["runs"]]
    window = max(1, min(window, len(totals) // 3 or 1))
    first = totals[1 : 1 + window] if len(totals) > window + 1 else totals[:window]
    last = totals[-window:]
    return {
        "totals": totals,
        "window": window,
        "first": summary(first),
        "last": summary(last),
        "ratio": (statistics.median(last) / statistics.median(first)) if first and last else None,
        "ratio_last_first_run": totals[-1] / totals[0] if totals and totals[0] else None,
        "slope_ms_per_run": _slope(totals[1:]) * 1000 if len(totals) > 3 else None,
    }


def _slope(values: list[float]) -> float:
    n = len(values)
    mean_x, mean_y = (n - 1) / 2, statistics.fmean(values)
    num = sum((i - mean_x) * (v - mean_y) for i, v in enumerate(values))
    den = sum((i - mean_x) ** 2 for i in range(n))
    return num / den if den else 0.0


def progress_split(runs: list[dict]) -> dict[str, dict[str, dict]]:
    """Per task: the median of each ``durationMs`` component over runs (ms)."""
    out: dict[str, dict[str, list]] = {}
    for run in runs:
        for job, comps in run.get("progress", {}).items():
            for key, value in comps.items():
                out.setdefault(job, {}).setdefault(key, []).append(value)
    return {job: {k: summary(v) for k, v in comps.items()} for job, comps in out.items()}
