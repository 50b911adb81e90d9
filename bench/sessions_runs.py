"""The sessions query (issue 15) on hourly runs: its cost per run beside silver's, its state size, its late events.

Usage (from the repository, after ``make setup``; ``make bench-sessions`` runs it):
    python -m bench.sessions_runs [--hours 12] [--events-per-second 2] [--out BENCHMARKS.md] [--summary bench/results/summary.json]

One process, one local Spark driver (``local[2]``, the tests' settings), a fresh lakehouse under
``.local/bench/sessions``: every hour one new producer hour is generated (the project's generator,
its late and duplicate events included) and the pipeline runs once, task by task, as the hourly
DAG would. Per run and task: wall seconds and CPU seconds of this process and its JVM (``/proc``,
the Python workers of the sessions query included); for the sessions task also what its summary
reports: sessions closed, late events recorded and reconciled, open sessions, the state's rows and
memory. The first two runs are reported but left out of the medians (they warm the JVM).

Side by side with Spark's own ``session_window``: :mod:`bench.sessions_compare` (which takes
its hours and seed from here).
"""

from __future__ import annotations

import argparse
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.data import landed
from bench.harness import PROJECT_DIR, local_driver, log, timed
from bench.render import publish
from lakehouse import catalog, runner
from lakehouse_tools.generator import write_hours

START = datetime(2026, 11, 20, tzinfo=UTC)
SEED = 7
WARM_UP_RUNS = 2
SESSIONS = next(t.task for t in catalog.tasks() if t.write is catalog.Write.SESSIONS)
SILVER = next(t.task for t in catalog.tasks() if t.write is catalog.Write.MERGE_NEW)
SESSIONS_TABLE = next(t.name for t in catalog.tasks() if t.write is catalog.Write.SESSIONS)
SILVER_TABLE = next(t.name for t in catalog.tasks() if t.write is catalog.Write.MERGE_NEW)


def run_hours(hours: int, eps: float, work: Path) -> list[dict]:
    spark = local_driver("bench-sessions")
    lakehouse, _ = landed(work, START, 0, eps, SEED)
    runs = []
    for hour in range(hours):
        (manifest,) = write_hours(lakehouse, START + timedelta(hours=hour), 1, eps, SEED)
        run = {"hour": hour, "lines": manifest.lines, "tasks": {}}
        for entry in catalog.tasks():
            with timed() as took:
                summary = runner.run(entry.task, ["--lakehouse-root", lakehouse.root]) or {}
            run["tasks"][entry.task] = {"seconds": took["wall_s"], "cpu_s": took["cpu_s"]}
            if entry.task == SESSIONS:
                run["sessions"] = {
                    "closed": sum(note.get("sessions", 0) for note in summary.get("batches", [])),
                    "late": sum(note.get("late", 0) for note in summary.get("batches", [])),
                    **{
                        k: summary.get(k)
                        for k in (
                            "late_reconciled",
                            "late_pending",
                            "open_sessions",
                            "state_rows",
                            "state_memory_bytes",
                            "watermark",
                        )
                    },
                }
        runs.append(run)
        s, t = run["sessions"], run["tasks"]
        log(
            f"hour {hour + 1}/{hours}: {run['lines']} lines; silver {t[SILVER]['seconds']:.1f} s "
            f"{t[SILVER]['cpu_s']:.1f} CPU-s; sessions {t[SESSIONS]['seconds']:.1f} s {t[SESSIONS]['cpu_s']:.1f} CPU-s, "
            f"{s['closed']} closed, {s['late']} late, {s['open_sessions']} open, state {s['state_rows']} rows "
            f"{(s['state_memory_bytes'] or 0) / 1e6:.1f} MB"
        )
    spark.stop()
    return runs


def render(runs: list[dict], hours: int, eps: float) -> tuple[str, dict]:
    steady = runs[WARM_UP_RUNS:] or runs

    def median(task: str, key: str) -> float:
        return statistics.median(run["tasks"][task][key] for run in steady)

    figures = {
        "sessions_run_cpu_s": round(median(SESSIONS, "cpu_s"), 1),
        "sessions_run_wall_s": round(median(SESSIONS, "seconds"), 1),
        "sessions_to_silver_cpu_ratio": round(
            median(SESSIONS, "cpu_s") / median(SILVER, "cpu_s"), 2
        ),
        "sessions_state_rows": runs[-1]["sessions"]["state_rows"],
        "sessions_state_memory_mb": round(
            (runs[-1]["sessions"]["state_memory_bytes"] or 0) / 1e6, 1
        ),
    }
    lines = [
        f"`python -m bench.sessions_runs --hours {hours} --events-per-second {eps:g}` (one local[2] driver; "
        f"{runs[0]['lines']} lines per hour). Per run: the sessions task beside silver's, what it closed, "
        "the late events it recorded and reconciled, and its state after the run. Medians over runs "
        f"{WARM_UP_RUNS + 1}..{len(runs)}: sessions {figures['sessions_run_wall_s']} s wall, "
        f"{figures['sessions_run_cpu_s']} CPU-s per run, {figures['sessions_to_silver_cpu_ratio']}x silver's CPU; "
        f"state after the last run {figures['sessions_state_rows']} rows, {figures['sessions_state_memory_mb']} MB.",
        "",
        "| run | lines | silver s | silver CPU-s | sessions s | sessions CPU-s | closed | late | reconciled | pending | open | state rows | state MB |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in runs:
        s, t = run["sessions"], run["tasks"]
        lines.append(
            f"| {run['hour'] + 1} | {run['lines']} | {t[SILVER]['seconds']:.1f} | {t[SILVER]['cpu_s']:.1f} | "
            f"{t[SESSIONS]['seconds']:.1f} | {t[SESSIONS]['cpu_s']:.1f} | {s['closed']} | {s['late']} | "
            f"{s['late_reconciled']} | {s['late_pending']} | {s['open_sessions']} | {s['state_rows']} | "
            f"{(s['state_memory_bytes'] or 0) / 1e6:.1f} |"
        )
    return "\n".join(lines), figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=int, default=12)
    parser.add_argument("--events-per-second", type=float, default=2.0)
    parser.add_argument("--work-dir", default=str(PROJECT_DIR / ".local" / "bench" / "sessions"))
    parser.add_argument("--out", help="replace this benchmark's section in that Markdown file")
    parser.add_argument("--summary", help="update this benchmark's keys in that JSON file")
    args = parser.parse_args(argv)
    runs = run_hours(args.hours, args.events_per_second, Path(args.work_dir))
    section, figures = render(runs, args.hours, args.events_per_second)
    publish(section, args.out, args.summary, figures, benchmark="sessions_runs")


if __name__ == "__main__":
    main()
