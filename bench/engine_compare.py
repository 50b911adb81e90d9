"""Per-event cost beside a minimal Spark job and Polars: every catalog table, four ways.

Usage (from the repository, after ``make setup``; ``make bench-compare`` runs it):
    python -m bench.engine_compare [--sizes 1M,5M] [--reps 2] [--contenders project,plain_spark,polars] \\
        [--check smallest|all|none] [--out BENCHMARKS.md] [--summary bench/results/summary.json]

Every contender (:mod:`bench.compare`) turns the same landing lines (:func:`bench.data.dataset_for`:
generated once, cached under ``.local/bench/data``) into the tables the catalog declares, as
Delta: the project's pipeline and its batch form write them all (but an operation's records); the
minimal jobs the dimension, bronze, silver, the quarantine, every gold table and the sessions, and
are reported as not implementing the rest. A table added to the catalog is counted with no change
here. Each run is a fresh process tree of its own (:func:`bench.harness.run_worker`) writing into
an empty lakehouse; per size, every repetition runs every contender, in alternating order.

Figures: wall seconds of the process, and CPU seconds of its whole process tree, start-up and
shutdown included (:func:`bench.harness.run_tree`), plus the CPU of PySpark's Python workers, which
no parent is charged for (a Spark job reads it just before ``spark.stop()``:
:func:`bench.harness.unreaped_cpu`). The project's run also reports CPU and wall per task.

Check (``--check``, by default at the smallest size): every table of each contender against the
project's, and the project's against the independent oracle (:mod:`bench.compare.check`).

Code: the Spark contenders import ``lakehouse`` as of HEAD (``git archive``; ``--code worktree``:
the files on disk), so edits made while it runs are in no figure. Section and summary keys:
:mod:`bench.compare.report`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from importlib import import_module
from importlib.metadata import version
from pathlib import Path

from bench.compare import BATCH, CONTENDERS, MODULES, declared_tables, implemented, spec_for
from bench.compare.report import check_failures, render, summary_figures
from bench.harness import PROJECT_DIR, alternating, code_snapshot, log, run_worker, worker_main
from bench.render import publish

WORK = PROJECT_DIR / ".local" / "bench" / "compare"
DATA = PROJECT_DIR / ".local" / "bench" / "data"


def run_contender(
    contender: str, dataset, label: str, rep: int, folder: Path, include: Path, timeout: float
) -> dict:
    """One contender's run into a fresh lakehouse over ``dataset`` (size ``label``): its figures
    and where its tables are."""
    from bench.data import fresh_lakehouse

    lakehouse = fresh_lakehouse(folder / contender, dataset)
    spec = spec_for(lakehouse.root, contender)
    if contender == BATCH:
        # Every event hour the data can hold: late events reach back hours before the first producer hour.
        first, end = dataset.start_time - timedelta(days=1), dataset.end_time + timedelta(hours=1)
        spec["batch_hours"] = [f"{first:%Y-%m-%dT%H:00Z}", f"{end:%Y-%m-%dT%H:00Z}"]
    # Exported code would look for the table-name metastore beside itself: this checkout's.
    metastore = os.environ.get("LAKEHOUSE_METASTORE_DIR") or str(PROJECT_DIR / ".local/metastore")
    code, wall, cpu, job, log_path = run_worker(
        "bench.engine_compare",
        contender,
        spec,
        folder,
        include,
        timeout,
        LAKEHOUSE_METASTORE_DIR=metastore,
    )
    run = {"size": label, "events": dataset.lines, "rep": rep, "contender": contender}
    run |= {"ok": job is not None, "exit_code": code, "wall": wall, "cpu": cpu}
    run["root"] = lakehouse.root
    if job is None:
        run["log_tail"] = log_path.read_text(errors="replace")[-3000:]
    else:  # PySpark's worker daemon ignores SIGCHLD: its workers' CPU reaches no RUSAGE_CHILDREN.
        run |= {"job": job, "cpu": cpu + job.get("unreaped_cpu", 0.0)}
    return run


def check_size(runs: list[dict], dataset) -> dict:
    """Every declared table of each contender's last run at this size against the project's; the
    project's against the oracle."""
    from bench.compare.check import against_oracle, compare_tables
    from lakehouse.config import Lakehouse

    last = {run["contender"]: run for run in runs}
    project = last.get("project")
    if project is None or not project["ok"]:
        return {"error": "the project's run failed or did not run: nothing to compare with"}
    reference = spec_for(project["root"], "project")["tables"]
    began, landing = time.perf_counter(), Lakehouse(dataset.root)
    tables = against_oracle(landing.landing_events, landing.landing_campaigns, reference)
    result: dict = {"contenders": {}}
    result["oracle"] = {"ok": all(t["ok"] for t in tables.values()), "tables": tables}
    result["oracle"]["seconds"] = time.perf_counter() - began
    for contender, run in last.items():
        if contender == "project":
            continue
        if not run["ok"]:
            result["contenders"][contender] = {
                "ok": False,
                "tables": {},
                "detail": "its run failed",
            }
            continue
        tables = spec_for(run["root"], contender)["tables"]
        tables = compare_tables(reference, tables, implemented(contender))
        result["contenders"][contender] = {"ok": all(t["ok"] for t in tables.values())}
        result["contenders"][contender]["tables"] = tables
    return result


def measure(options) -> dict:
    from bench.data import dataset_for
    from bench.harness import become_subreaper, machine_info, parse_size, size_label
    from lakehouse import catalog

    work = Path(options.work_dir).absolute()
    work.mkdir(parents=True, exist_ok=True)
    become_subreaper()
    contenders = [c.strip() for c in options.contenders.split(",") if c.strip()]
    if unknown := set(contenders) - set(CONTENDERS):
        raise SystemExit(f"unknown contender(s) {sorted(unknown)}; choose from {CONTENDERS}")
    sizes = sorted(parse_size(s) for s in options.sizes.split(","))
    commit, include = code_snapshot(work, worktree=options.code == "worktree")
    sessions = (t.task for t in catalog.tasks() if t.write is catalog.Write.SESSIONS)
    results = {
        "command": command_line(options),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_at_start": os.getloadavg(),
        "machine": machine_info(),
        "versions": {
            name: version(name) for name in ("pyspark", "delta-spark", "polars", "deltalake")
        },
        "commit": commit,
        "code": options.code,
        "sizes": sizes,
        "reps": options.reps,
        "contenders": contenders,
        # Every table the catalog declares: each contender's row in the check, implemented or not.
        "catalog": declared_tables(),
        "sessions_task": next(sessions, None),
        "check": options.check,
        "datasets": {},
        "runs": [],
        "checks": {},
        "notes": options.note,
    }
    log(f"code {commit} ({options.code}); load average {results['load_at_start']}")
    for index, size in enumerate(sizes):
        label, began = size_label(size), time.perf_counter()
        dataset = dataset_for(Path(options.data_dir), size)
        results["datasets"][label] = {"events": size, "lines": dataset.lines}
        results["datasets"][label] |= {"hours": dataset.hours, "eps": dataset.eps}
        log(f"data {label}: {dataset.lines} lines in {time.perf_counter() - began:.0f} s")
        folder, runs = work / "runs" / label, []
        for rep in range(options.reps):
            for contender in alternating(contenders, rep):
                runs.append(
                    run_contender(contender, dataset, label, rep, folder, include, options.timeout)
                )
                results["runs"].append(run := runs[-1])
                state = "" if run["ok"] else f" FAILED (exit {run['exit_code']}; see {folder})"
                log(
                    f"{label} rep {rep + 1}/{options.reps} {contender}: "
                    f"{run['cpu']:.1f} CPU-s, {run['wall']:.1f} wall-s{state}"
                )
                save(results, work / "results.json")
        if options.check == "all" or (options.check == "smallest" and index == 0):
            results["checks"][label] = check_size(runs, dataset)
            failed = check_failures({"checks": {label: results["checks"][label]}})
            log(f"{label} check: " + ("; ".join(failed) if failed else "every table passed"))
        if not options.keep:
            shutil.rmtree(folder, ignore_errors=True)
    results["load_at_end"] = os.getloadavg()
    results["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    save(results, work / "results.json")
    return results


def save(results: dict, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1, default=str))
    os.replace(tmp, path)


def command_line(options) -> str:
    """The run's command, its options but the defaults of ``make bench-compare``'s."""
    parts = ["python -m bench.engine_compare", f"--sizes {options.sizes}", f"--reps {options.reps}"]
    for name, default in (
        ("contenders", ",".join(CONTENDERS)),
        ("check", "smallest"),
        ("code", "head"),
    ):
        if getattr(options, name) != default:
            parts.append(f"--{name} {getattr(options, name)}")
    return " ".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--sizes", default="1M,5M", help="events per dataset, e.g. 1M,5M")
    add("--reps", type=int, default=2)
    add("--contenders", default=",".join(CONTENDERS), help=f"a subset of {','.join(CONTENDERS)}")
    add(
        "--check",
        choices=("smallest", "all", "none"),
        default="smallest",
        help="compare the tables with the project's and the oracle's at these sizes",
    )
    add(
        "--code",
        choices=("head", "worktree"),
        default="head",
        help="the lakehouse code the Spark contenders import: HEAD's, exported, or the files on disk",
    )
    add("--data-dir", default=str(DATA))
    add("--work-dir", default=str(WORK))
    add("--keep", action="store_true", help="keep the last run's tables of every contender")
    add("--timeout", type=float, default=3 * 3600, help="seconds before a run is killed")
    add("--out", help="render that Markdown file (BENCHMARKS.md) from the results")
    add("--summary", help="update this benchmark's keys in that JSON file")
    add("--note", action="append", default=[], help="a paragraph about this run for the section")
    options = parser.parse_args(argv)
    results = measure(options)
    publish(
        render(results),
        options.out,
        options.summary,
        summary_figures(results),
        benchmark="engine_compare",
        renderer="bench.compare.report",
        results=results,
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:  # one contender's run (run_contender)
        worker_main({c: import_module(m).run for c, m in MODULES.items()}, sys.argv[2:])
    else:
        main()
