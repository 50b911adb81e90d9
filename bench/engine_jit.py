"""The engine's JIT thresholds: HotSpot's defaults vs ten times them, on small hours and a 1M-event hour.

Usage (from the repository, after ``make setup``):
    python -m bench.engine_jit [--reps 2] [--hours 3] [--large-events 1000000] [--out BENCHMARKS.md]

Each repetition starts a fresh engine of its own (port 15009, state in ``.local/bench/jit``) per
way, in alternating order (scaled, default, default, scaled, ...), and runs in it, every task in
DAG order in this process (what `airflow dags test` runs, without Airflow): 3 producer hours at
0.2 events/s by one pipeline run (the engine's first: its warm-up), then ``--hours`` single new
hours of about 720 events, each followed by one run, then one hour of ``--large-events`` events
and its run. "default" is the engine as it starts (HotSpot's thresholds);
"scaled" adds ``-XX:CompileThresholdScaling=10`` (``$LAKEHOUSE_ENGINE_JAVA_OPTIONS``): the
JIT's own CPU falls by half or more, but the code it leaves to C1 costs more than that saves, so
the engine keeps the defaults (BENCHMARKS.md). Per run: wall seconds, the CPU seconds of the server JVM
(with the Python workers it has reaped) and of its JIT compiler threads, from ``/proc``. After
the last run every declared table is checked against the plain-Python oracle.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.code_generation import engine_cpu, log
from bench.harness import markers
from bench.render import publish

PROJECT_DIR = Path(__file__).resolve().parents[1]
START = datetime(2026, 11, 20, 0, tzinfo=UTC)
SEED = 31
SMALL_EVENTS_PER_SECOND = 0.2
WORK = PROJECT_DIR / ".local" / "bench" / "jit"
BEGIN, END = markers("bench/engine_jit.py")
WAYS = {"scaled": "-XX:CompileThresholdScaling=10", "default": ""}


def jit_cpu() -> float:
    """CPU seconds so far of the server JVM's JIT compiler threads (C1 and C2)."""
    from lakehouse_tools import engine

    total = 0.0
    for thread in Path(f"/proc/{engine.server_pid()}/task").iterdir():
        try:
            stat = (thread / "stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        if "CompilerThre" in stat[stat.index("(") : stat.rindex(")")]:
            fields = stat.rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def large_hour_landing(events: int) -> Path:
    """The landing zone of one generated hour of ``events`` events, made once and reused."""
    from lakehouse.config import Lakehouse
    from lakehouse_tools.generator import write_campaigns, write_hours

    root = WORK / f"large-{events}"
    done = root / "generated"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        lake = Lakehouse(root=str(root))
        write_campaigns(lake, seed=SEED)
        began = time.monotonic()
        write_hours(lake, large_hour_start(), 1, events_per_second=events / 3600, seed=SEED)
        log(f"generated an hour of {events} events in {time.monotonic() - began:.0f} s")
        done.touch()
    return Path(Lakehouse(root=str(root)).landing_events)


def large_hour_start() -> datetime:
    return START + timedelta(hours=12)  # after any --hours of small ones


def one_way(way: str, hours: int, large_events: int) -> dict:
    """Each run's (wall s, engine CPU s, JIT CPU s) on a fresh engine started ``way``, and the oracle's verdict."""
    from bench.compare.check import against_oracle
    from lakehouse import catalog, runner
    from lakehouse.config import Lakehouse
    from lakehouse_tools.generator import write_campaigns, write_hours

    root = WORK / "lakehouse"
    shutil.rmtree(root, ignore_errors=True)
    lake = Lakehouse(root=str(root))
    write_campaigns(lake, seed=SEED)
    write_hours(lake, START, 3, events_per_second=SMALL_EVENTS_PER_SECOND, seed=SEED)
    os.environ["LAKEHOUSE_ENGINE_JAVA_OPTIONS"] = WAYS[way]
    subprocess.run(
        [sys.executable, "-m", "lakehouse_tools.engine", "up"], check=True, capture_output=True
    )
    pipeline = [spec.task for spec in catalog.tasks()]

    def run(label: str) -> tuple[float, float, float]:
        cpu, jit, started = engine_cpu(), jit_cpu(), time.monotonic()
        for task in pipeline:
            runner.run(task, ["--lakehouse-root", lake.root])
        figures = (time.monotonic() - started, engine_cpu() - cpu, jit_cpu() - jit)
        log(
            f"{way}: {label}: {figures[0]:.1f} s wall, engine {figures[1]:.1f} CPU-s, JIT {figures[2]:.1f}"
        )
        return figures

    try:
        runs = {"first": run("first run (3 small hours)")}
        for hour in range(hours):
            write_hours(
                lake,
                START + timedelta(hours=3 + hour),
                1,
                events_per_second=SMALL_EVENTS_PER_SECOND,
                seed=SEED,
            )
            runs[f"small {hour + 1}"] = run(f"new small hour {hour + 1}")
        shutil.copytree(large_hour_landing(large_events), lake.landing_events, dirs_exist_ok=True)
        runs["large"] = run(f"new hour of {large_events} events")
    finally:
        subprocess.run(
            [sys.executable, "-m", "lakehouse_tools.engine", "down"],
            check=False,
            capture_output=True,
        )
    tables = {spec.name: lake.table(spec.name).path for spec in catalog.tables()}
    verdicts = against_oracle(lake.landing_events, lake.landing_campaigns, tables)
    wrong = {name: v["detail"] for name, v in verdicts.items() if not v["ok"]}
    log(f"{way}: every table equals the oracle" if not wrong else f"{way}: DIFFERS: {wrong}")
    return {"runs": runs, "oracle_ok": not wrong, "oracle_differences": wrong}


def cell(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


def render(results: dict) -> str:
    options, reps = results["options"], results["reps"]
    lines = [
        BEGIN,
        "",
        f"* **Command:** `python -m bench.engine_jit --reps {options['reps']} --hours {options['hours']} "
        f"--large-events {options['large_events']} --out BENCHMARKS.md`",
        f"* **Date:** {results['started']}; load average at the start {results['load']}; "
        f"{results['cores']} cores; code {results['commit']}",
        "* **Work:** per way and repetition a fresh engine (`local[2]`): 3 hours at 0.2 events/s by its "
        f"first run, then {options['hours']} single new hours (about 720 events each), then one new hour of "
        f"{options['large_events']:,} events, each followed by one run of every task in DAG order; the ways "
        "alternate (scaled, default, default, scaled, ...). CPU = the engine's server JVM with the "
        "Python workers it has reaped; JIT = the JVM's compiler threads.",
        "* **Checked:** "
        + (
            "every declared table of every run equals the oracle."
            if all(rep["oracle_ok"] for way in reps.values() for rep in way)
            else "SOME TABLES DIFFER from the oracle: "
            + "; ".join(
                f"{way}: {rep['oracle_differences']}"
                for way, done in reps.items()
                for rep in done
                if not rep["oracle_ok"]
            )
        ),
        "",
        "| run | default: wall s | engine CPU s | JIT CPU s | scaled ×10: wall s | engine CPU s | JIT CPU s "
        "| engine CPU scaled / default |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    labels = list(reps["scaled"][0]["runs"])
    totals = {way: [sum(r[1] for r in rep["runs"].values()) for rep in reps[way]] for way in reps}
    for label in labels:
        cells, medians = [], {}
        for way in ("default", "scaled"):
            figures = [rep["runs"][label] for rep in reps[way]]
            cells += [cell([f[i] for f in figures]) for i in range(3)]
            medians[way] = statistics.median(f[1] for f in figures)
        name = {
            "first": "first run (3 small hours)",
            "large": f"a new hour of {options['large_events']:,} events",
        }.get(label) or label.replace("small", "new small hour")
        lines.append(
            f"| {name} | {' | '.join(cells)} | {medians['scaled'] / medians['default']:.2f}× |"
        )
    lines += [
        f"| **all runs**, engine CPU s | | {cell(totals['default'])} | | | {cell(totals['scaled'])} | "
        f"| {statistics.median(totals['scaled']) / statistics.median(totals['default']):.2f}× |",
        "",
        f"Median (min–max) over {options['reps']} repetition(s).",
        "",
        END,
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--hours", type=int, default=3)
    parser.add_argument("--large-events", type=int, default=1_000_000)
    parser.add_argument("--out", help="render that Markdown file from bench/results afterwards")
    options = parser.parse_args(argv)
    os.environ.update(
        LAKEHOUSE_ENGINE="connect",
        LAKEHOUSE_ENGINE_PORT="15009",
        LAKEHOUSE_ENGINE_DIR=str(WORK / "engine"),
    )
    load = os.getloadavg()
    results = {
        "options": vars(options) | {"out": None},
        "started": f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}",
        "load": ", ".join(f"{x:.1f}" for x in load),
        "cores": os.cpu_count(),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=PROJECT_DIR,
        ).stdout.strip(),
        "reps": {way: [] for way in WAYS},
    }
    large_hour_landing(options.large_events)
    for rep in range(options.reps):
        for way in WAYS if rep % 2 == 0 else list(WAYS)[::-1]:
            log(f"rep {rep + 1}/{options.reps}: {way}")
            results["reps"][way].append(one_way(way, options.hours, options.large_events))
    publish(render(results), options.out, None, {}, benchmark="engine_jit", results=results)
    if not all(rep["oracle_ok"] for way in results["reps"].values() for rep in way):
        sys.exit("engine_jit: some tables differ from the oracle (above)")


if __name__ == "__main__":
    main()
