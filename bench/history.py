"""A small hour after a year of history against the same hour on a fresh lakehouse (issue 56).

Usage (from the repository, ``make bench-history`` runs it):
    python -m bench.history [--history-hours 8760] [--reps 2] [--events 2000] [--work DIR]

Two lakehouses and one warm engine (``LAKEHOUSE_METASTORE=none``: tables by path):
- *fresh*: the campaigns and 3 producer hours of ``--events`` events, every task run once;
- *history*: ``--history-hours`` producer hours before those same 3 (4 small files an hour from
  the project's generator, ``--history-eps`` events a second), the whole landed backlog caught up
  by one run of every task, as a deployment starting with a backlog does. The caught-up lakehouse
  is kept in ``<work>/history.caught-up`` and copied back on the next run (the catch-up is the
  long part; checkpoints name absolute paths, so the copy goes back to the same folder).
Then :data:`SETTLING_HOURS` hourly runs in both (kept with the copy), so that every table's log
has a checkpoint after the catch-up's one large commit. Each repetition lands the same new hour
of ``--events`` events in both and runs every task there
(``bench.small_hour``'s measure: the task's process tree and the engine's), the order of the two
alternating; one more repetition first warms the engine up and is not kept. Before and after each run, the history lakehouse's artefacts are sized (every table's
``_delta_log``, every checkpoint folder with bronze's records): their growth per run. Last, both
lakehouses' tables are checked against the plain-Python oracle.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.compare.check import against_oracle
from bench.harness import PROJECT_DIR, Engine, become_subreaper, cell, log, median
from bench.render import publish
from bench.small_hour import run_tasks
from lakehouse import catalog
from lakehouse.config import Lakehouse
from lakehouse.landing import LandedIndex
from lakehouse_tools.generator import write_campaigns, write_hours

MEASURED = datetime(2026, 11, 20, tzinfo=UTC)  # the first measured hour, in both lakehouses
PRIMING_HOURS = 3  # the hours just before it, the same in both
# Hourly runs after the catch-up, before any measured one, the same in both: the catch-up adds
# every file in one commit (silver's JSON commit holds 32 MB after a year), which every reader
# replays until Delta's 10th commit writes the first checkpoint after it. Measured after them:
# the steady state of a deployment that has run a few hours since its catch-up.
SETTLING_HOURS = 10
SEED = 56


def land_history(lake: Lakehouse, hours: int, eps: float, events: int) -> None:
    """Campaigns, ``hours`` small hours, then the priming hours every lakehouse shares."""
    write_campaigns(lake, seed=SEED)
    priming = MEASURED - timedelta(hours=PRIMING_HOURS)
    if hours:
        write_hours(lake, priming - timedelta(hours=hours), hours, eps, SEED)
    write_hours(lake, priming, PRIMING_HOURS, events / 3600, SEED)


def prepared(work: Path, name: str, hours: int, eps: float, events: int) -> Lakehouse:
    """A lakehouse with its history landed and run once, from the kept copy when there is one."""
    root, kept = work / name, work / f"{name}.caught-up"
    lake = Lakehouse(str(root))
    shutil.rmtree(root, ignore_errors=True)
    if kept.is_dir():
        log(f"{name}: the caught-up lakehouse kept in {kept}, copied back")
        shutil.copytree(kept, root, symlinks=True)
    else:
        started = time.perf_counter()
        land_history(lake, hours, eps, events)
        log(
            f"{name}: {hours + PRIMING_HOURS:,} hours landed in {time.perf_counter() - started:.0f} s"
        )
        caught_up = run_tasks(f"{name}-catch-up", lake, work / "logs")
        (root / "catch-up.json").write_text(json_text(caught_up))
    if not (root / "settled.json").is_file():
        runs = []
        for n in range(SETTLING_HOURS):
            write_hours(lake, MEASURED + timedelta(hours=n), 1, events / 3600, SEED)
            runs.append(run_tasks(f"{name}-settling-{n}", lake, work / "logs"))
        (root / "settled.json").write_text(json_text({"hours": SETTLING_HOURS, "runs": runs}))
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(root, kept, symlinks=True)
    return lake


def json_text(figures: dict) -> str:
    return json.dumps(figures, indent=2) + "\n"


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def artefacts(lake: Lakehouse) -> dict[str, int]:
    """Bytes of what a run adds to besides the data: each table's log and each checkpoint folder."""
    sizes = {}
    for spec in catalog.tables():
        table = lake.table(spec.name)
        sizes[f"{spec.name} log"] = size_of(Path(table.path) / "_delta_log")
        sizes[f"{spec.name} checkpoints"] = size_of(Path(table.checkpoint_root))
    return {name: size for name, size in sizes.items() if size}


def first_run(root: Path) -> dict:
    """The first hourly run after a lakehouse's catch-up (its first settling run)."""
    return json.loads((root / "settled.json").read_text())["runs"][0]


def measure(args) -> dict:
    work = args.work.absolute()
    logs = work / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    os.environ.update(LAKEHOUSE_ENGINE="connect", LAKEHOUSE_METASTORE="none")
    engine = Engine(work / "engine")
    engine.up()
    become_subreaper()  # after the engine's start: its orphaned supervisor is not our child
    runs: dict[str, list[dict]] = {"fresh": [], "history": []}
    growth: list[dict[str, int]] = []
    try:
        lakes = {
            "fresh": prepared(work, "fresh", 0, args.history_eps, args.events),
            "history": prepared(work, "history", args.history_hours, args.history_eps, args.events),
        }
        # Repetition 0 warms the engine up (its JIT, Delta's caches of both lakehouses): not kept.
        for rep in range(args.reps + 1):
            hour = MEASURED + timedelta(hours=SETTLING_HOURS + rep)
            order = ["fresh", "history"] if rep % 2 else ["history", "fresh"]
            for name in order:
                write_hours(lakes[name], hour, 1, args.events / 3600, SEED)
                before = artefacts(lakes[name])
                run = run_tasks(f"{name}-{rep}", lakes[name], logs)
                if rep == 0:
                    continue
                runs[name].append(run)
                if name == "history":
                    after = artefacts(lakes[name])
                    growth.append({k: after[k] - before.get(k, 0) for k in after})
        # One more history run with the daily whole look of the landing folder due: not kept
        # among the reps (one run a day pays it), its bronze figure reported apart.
        bronze = lakes["history"].table("bronze.ad_events")
        index = LandedIndex(bronze.checkpoint())
        index.state["whole_look_at"] = None
        index.save()
        write_hours(
            lakes["history"],
            MEASURED + timedelta(hours=SETTLING_HOURS + args.reps + 1),
            1,
            args.events / 3600,
            SEED,
        )
        whole_look = run_tasks("history-whole-look", lakes["history"], logs)
        sizes = artefacts(lakes["history"])
    finally:
        engine.down()
    verdicts = {}
    for name, lake in lakes.items():
        tables = {spec.name: lake.table(spec.name).path for spec in catalog.tables()}
        checked = against_oracle(lake.landing_events, lake.landing_campaigns, tables)
        verdicts[name] = {t: v["detail"] for t, v in checked.items() if not v["ok"]}
    tasks = [spec.task for spec in catalog.tasks()]
    per_task = {
        name: {
            task: round(median([run["tasks"][task]["cpu_s"] for run in runs[name]]), 2)
            for task in tasks
        }
        for name in runs
    }
    totals = {name: [run["total_cpu_s"] for run in runs[name]] for name in runs}
    ratios = [h / f for f, h in zip(totals["fresh"], totals["history"], strict=True)]
    return {
        "history_hours": args.history_hours,
        "history_eps": args.history_eps,
        "events_per_hour": args.events,
        "reps": args.reps,
        "per_task_cpu_s": per_task,
        "total_cpu_s": totals,
        "ratios": [round(r, 3) for r in ratios],
        "bronze_whole_look_cpu_s": whole_look["tasks"][bronze.spec.task]["cpu_s"],
        # The first run after the catch-up rolls bronze's source log over when it is large.
        "bronze_generation": bronze.current_generation(),
        "bronze_first_run_cpu_s": first_run(work / "history")["tasks"][bronze.spec.task]["cpu_s"],
        "settling_hours": SETTLING_HOURS,
        "artefact_bytes": sizes,
        "artefact_growth_per_run": {k: [g.get(k, 0) for g in growth] for k in sizes},
        "oracle_differences": verdicts,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def render(figures: dict) -> str:
    per_task, totals = figures["per_task_cpu_s"], figures["total_cpu_s"]
    ok = not any(figures["oracle_differences"].values())
    rows = [
        f"* **Command:** `python -m bench.history --history-hours {figures['history_hours']} "
        f"--reps {figures['reps']} --events {figures['events_per_hour']}`",
        f"* **Date:** {figures['measured_at']}; one warm engine for both lakehouses",
        f"* **Work:** a new hour of {figures['events_per_hour']:,} events, every task, in a fresh "
        f"lakehouse (3 hours before it) and in one with {figures['history_hours']:,} more hours "
        f"before those (4 files an hour, {figures['history_eps']} events/s) caught up in one run"
        + (
            f", then {figures['settling_hours']} hourly runs in both before the measured ones (so "
            "that every Delta log has a checkpoint after the catch-up's one large commit)"
            if figures.get("settling_hours")
            else ""
        )
        + "; the order alternating; every table of both checked against the oracle: "
        f"{'equal' if ok else 'DIFFERS'}.",
        "",
        "| task | fresh CPU-s | after the history CPU-s | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for task, fresh in per_task["fresh"].items():
        year = per_task["history"][task]
        rows.append(f"| {task} | {fresh:.2f} | {year:.2f} | {year / fresh if fresh else 0:.2f} |")
    rows.append(
        f"| **all tasks** | {cell(totals['fresh'], 2)} | {cell(totals['history'], 2)} | "
        f"{cell(figures['ratios'], 2)} |"
    )
    bronze = catalog.get("bronze.ad_events").task
    if "bronze_whole_look_cpu_s" in figures:  # measured since the daily whole look exists
        rows += [
            "",
            f"Once a day bronze's checks list the whole landing folder (the runs above list the "
            f"hour folders that can hold new files, and 24 older ones): one more run after the "
            f"history with that look due cost bronze {figures['bronze_whole_look_cpu_s']:.2f} "
            f"CPU-s, against {per_task['history'][bronze]:.2f} for its other runs (not among the "
            "repetitions).",
        ]
    if figures.get("bronze_generation"):
        rows += [
            "",
            "The first run after the catch-up "
            + (
                "(the first settling run)"
                if figures.get("settling_hours")
                else "(the warm-up, on a cold engine)"
            )
            + " found bronze's "
            f"file-source log over its roll-over size and moved bronze to checkpoint generation "
            f"{figures['bronze_generation']}, its index carried: bronze cost "
            f"{figures['bronze_first_run_cpu_s']:.2f} CPU-s in that run (a whole look too).",
        ]
    rows += [
        "",
        "What the history lakehouse's artefacts hold after the runs, and what each run added:",
        "",
        "| artefact | bytes | growth per run |",
        "| --- | ---: | ---: |",
    ]
    for name, size in figures["artefact_bytes"].items():
        added = ", ".join(f"{g:+,}" for g in figures["artefact_growth_per_run"][name])
        rows.append(f"| {name} | {size:,} | {added} |")
    rows += [
        "",
        "Where each stops growing (a few runs cannot reach it; the bounds are the tables' and "
        "Spark's settings): a Delta log drops commits older than 30 days when it writes a "
        "checkpoint (`delta.logRetentionDuration`; ops tables: their declared retention, by the "
        "maintenance DAG); a checkpoint keeps its newest 100 batches' offsets, commits and state "
        "versions (`minBatchesToRetain`); bronze's file-source log (`sources/0`, one entry per "
        "file read) rolls over to a new checkpoint generation at 4 MiB, the retired one deleted "
        "by the maintenance DAG a week later.",
    ]
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history-hours", type=int, default=8760)
    parser.add_argument("--history-eps", type=float, default=0.01, help="events/s of the history")
    parser.add_argument("--events", type=int, default=2000, help="events of each measured hour")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--work", type=Path, default=PROJECT_DIR / ".local" / "bench" / "history")
    parser.add_argument("--out", help="render that Markdown file (BENCHMARKS.md) from the results")
    parser.add_argument("--summary", help="update this benchmark's keys in that JSON file")
    args = parser.parse_args(argv)
    figures = measure(args)
    (args.work / "results.json").write_text(json_text(figures))  # kept whatever happens next
    publish(
        render(figures),
        args.out,
        args.summary,
        {"small_hour_cpu_ratio_year_to_fresh": median(figures["ratios"])}
        if args.history_hours >= 8760
        else {},
        benchmark="history",
        results=figures,
    )
    if any(figures["oracle_differences"].values()):
        raise SystemExit(f"the oracle differs: {figures['oracle_differences']}")


if __name__ == "__main__":
    main()
