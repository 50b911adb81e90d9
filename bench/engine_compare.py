"""Per-event cost beside a minimal Spark job and Polars: every catalog table, four ways.

Usage (from the repository, after ``make setup``; ``make bench-compare`` runs it):
    python -m bench.engine_compare [--sizes 1M,5M] [--reps 2] [--contenders project,plain_spark,polars] \\
        [--check smallest|all|none] [--out BENCHMARKS.md] [--summary bench/results/summary.json]
    python -m bench.engine_compare --from-results .local/bench/compare/results.json --out BENCHMARKS.md  # save, render

Every contender (:mod:`bench.compare`) turns the same landing lines (:func:`bench.data.dataset_for`:
generated once, cached under ``.local/bench/data``) into the tables the catalog declares, as
Delta: the project's pipeline writes them all (but an operation's records, e.g. maintenance's);
the minimal jobs write the dimension, bronze, silver, the quarantine, every gold table and the
sessions, and are reported as not implementing the rest (the ops records). A table added to the
catalog is counted with no change here. Each run is a fresh process of its own
(``python -m bench.compare.job``) writing into an empty lakehouse; per size, every repetition runs
every contender, in alternating order (a, b, c, d, then d, c, b, a, ...).

Figures: wall seconds of the process, and CPU seconds (user + system) of its whole process tree:
Python, a driver JVM and whatever they start, start-up and shutdown included. This process is a
child subreaper and waits for each run's every descendant, so ``RUSAGE_CHILDREN`` covers them all
but PySpark's Python workers (the sessions' state functions run in them): their daemon ignores
SIGCHLD, so the kernel reaps them and their CPU reaches no parent. A Spark job reads their CPU
just before ``spark.stop()`` (:func:`bench.harness.unreaped_cpu`); it is added.
The project's run also reports CPU and wall per task (its Python process plus its JVM, read around
each task).

Check (``--check``, by default at the smallest size): every table of each contender against the
project's (:mod:`bench.compare.check`: silver's rows, the quarantine's lines per reason, bronze's
lines, every other table's rows as a set), and the project's against the independent oracle
(:mod:`lakehouse_tools.oracle`). A contender that does less than the project is caught there; one
that does not implement a table is reported so, not failed.

The section of BENCHMARKS.md and the summary keys: :mod:`bench.compare.report`.

Code: the Spark contenders import ``lakehouse`` from the commit checked out when the benchmark
starts (``git archive HEAD include``; ``--code worktree`` for the files on disk), so edits made
while it runs are in no figure; the commit is recorded. ``--baseline REV`` adds the contender
``baseline``: the project's pipeline with ``include/`` as of REV, in the same run and order, so a
change's before and after are measured side by side (its tables are checked like the others').
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.compare import BASELINE, BATCH, CONTENDERS, declared_tables, implemented, spec_for
from bench.compare.report import render, summary_figures
from bench.harness import alternating, code_snapshot, log
from bench.render import publish

PROJECT_DIR = Path(__file__).resolve().parents[1]
WORK = PROJECT_DIR / ".local" / "bench" / "compare"
DATA = PROJECT_DIR / ".local" / "bench" / "data"
RUN_TIMEOUT = 3 * 3600


# ----------------------------------------------------------------------------------------------
# Measuring


def run_contender(
    contender: str, dataset, label: str, rep: int, work: Path, include: Path, timeout: float
) -> dict:
    """One contender's run into a fresh lakehouse over ``dataset`` (size ``label``): its figures and where its tables are."""
    from bench.data import fresh_lakehouse
    from bench.harness import run_tree

    folder = work / "runs" / label
    root = folder / contender
    lakehouse = fresh_lakehouse(root, dataset)
    spec = spec_for(lakehouse.root, contender, str(folder / f"{contender}.result.json"))
    if contender == BATCH:
        # Every event hour the data can hold: late events reach back hours before the first producer hour.
        first, end = dataset.start_time - timedelta(days=1), dataset.end_time + timedelta(hours=1)
        spec["batch_hours"] = [f"{first:%Y-%m-%dT%H:00Z}", f"{end:%Y-%m-%dT%H:00Z}"]
    spec_path = folder / f"{contender}.spec.json"
    spec_path.write_text(json.dumps(spec, indent=1))
    job = (
        "project" if contender == BASELINE else contender
    )  # the same pipeline, another commit's code
    Path(spec["result"]).unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(include), str(PROJECT_DIR)]),
        "LAKEHOUSE_ENGINE": "local",
        # Exported code would look for the table-name metastore beside itself: this checkout's.
        "LAKEHOUSE_METASTORE_DIR": os.environ.get("LAKEHOUSE_METASTORE_DIR")
        or str(PROJECT_DIR / ".local" / "metastore"),
    }
    env.pop("PYSPARK_GATEWAY_PORT", None)
    log_path = folder / f"{contender}.log"
    code, wall, cpu = run_tree(
        [sys.executable, "-m", "bench.compare.job", job, str(spec_path)], env, log_path, timeout
    )
    run = {
        "size": label,
        "events": dataset.lines,
        "rep": rep,
        "contender": contender,
        "ok": code == 0,
        "exit_code": code,
        "wall": wall,
        "cpu": cpu,
        "root": lakehouse.root,
    }
    if code == 0 and Path(spec["result"]).exists():
        run["job"] = json.loads(Path(spec["result"]).read_text())
        # PySpark's worker daemon ignores SIGCHLD: its workers' CPU reaches no RUSAGE_CHILDREN.
        run["cpu"] += run["job"].get("unreaped_cpu", 0.0)
    else:
        run["ok"] = False
        run["log_tail"] = log_path.read_text(errors="replace")[-3000:]
    return run


def check_size(runs: list[dict], dataset, with_oracle: bool) -> dict:
    """Every declared table of each contender's last run at this size against the project's; the
    project's against the oracle."""
    from bench.compare.check import against_oracle, compare_tables
    from lakehouse.config import Lakehouse

    last = {run["contender"]: run for run in runs}
    project = last.get("project")
    result: dict = {"contenders": {}}
    if project is None or not project["ok"]:
        result["error"] = "the project's run failed or did not run: nothing to compare with"
        return result
    reference = spec_for(project["root"], "project", "")["tables"]
    if with_oracle:
        began = time.perf_counter()
        tables = against_oracle(
            Lakehouse(dataset.root).landing_events,
            Lakehouse(dataset.root).landing_campaigns,
            reference,
        )
        result["oracle"] = {
            "ok": all(t["ok"] for t in tables.values()),
            "tables": tables,
            "seconds": time.perf_counter() - began,
        }
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
        tables = compare_tables(
            reference, spec_for(run["root"], contender, "")["tables"], implemented(contender)
        )
        result["contenders"][contender] = {
            "ok": all(t["ok"] for t in tables.values()),
            "tables": tables,
        }
    return result


def measure(options, out_results: Path) -> dict:
    from bench.data import dataset_for
    from bench.harness import become_subreaper, machine_info, parse_size, size_label

    work = Path(options.work_dir).absolute()
    work.mkdir(parents=True, exist_ok=True)
    become_subreaper()
    contenders = [c.strip() for c in options.contenders.split(",") if c.strip()]
    unknown = set(contenders) - set(CONTENDERS)
    if unknown:
        raise SystemExit(
            f"unknown contender(s) {', '.join(sorted(unknown))}; choose from {', '.join(CONTENDERS)}"
        )
    sizes = sorted(parse_size(s) for s in options.sizes.split(","))
    commit, include = code_snapshot(work, worktree=options.code == "worktree")
    includes = dict.fromkeys(contenders, include)
    baseline = None
    if options.baseline:
        baseline, includes[BASELINE] = code_snapshot(work, options.baseline)
        contenders.insert(1, BASELINE)
    results = {
        "command": command_line(options),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_at_start": os.getloadavg(),
        "machine": machine_info(),
        "versions": engine_versions(),
        "commit": commit,
        "baseline": baseline,
        "code": options.code,
        "sizes": sizes,
        "reps": options.reps,
        "contenders": contenders,
        # Every table the catalog declares: each contender's row in the check, implemented or not.
        "catalog": declared_tables(),
        "sessions_task": sessions_task(),
        "check": options.check,
        "datasets": {},
        "runs": [],
        "checks": {},
        "notes": options.note,
    }
    log(f"code {commit} ({options.code}); load average {results['load_at_start']}")
    datasets = []
    for size in sizes:
        began = time.perf_counter()
        dataset = dataset_for(Path(options.data_dir), size)
        datasets.append((size_label(size), dataset))
        results["datasets"][size_label(size)] = {
            "events": size,
            "lines": dataset.lines,
            "hours": dataset.hours,
            "eps": dataset.eps,
            "root": dataset.root,
        }
        log(
            f"data {size_label(size)}: {dataset.lines} lines, {dataset.hours} hour(s) in {time.perf_counter() - began:.0f} s"
        )
    for index, (label, dataset) in enumerate(datasets):
        runs = []
        for rep in range(options.reps):
            for contender in alternating(contenders, rep):
                run = run_contender(
                    contender, dataset, label, rep, work, includes[contender], options.timeout
                )
                runs.append(run)
                results["runs"].append(run)
                state = (
                    ""
                    if run["ok"]
                    else f" FAILED (exit {run['exit_code']}; see {work}/runs/{label}/{contender}.log)"
                )
                log(
                    f"{label} rep {rep + 1}/{options.reps} {contender}: {run['cpu']:.1f} CPU-s, {run['wall']:.1f} wall-s{state}"
                )
                save(results, out_results)
        if options.check == "all" or (options.check == "smallest" and index == 0):
            began = time.perf_counter()
            checked = check_size(runs, dataset, with_oracle=True)
            results["checks"][label] = checked
            log(f"{label} check ({time.perf_counter() - began:.0f} s): " + check_summary(checked))
        if not options.keep:
            shutil.rmtree(work / "runs" / label, ignore_errors=True)
        save(results, out_results)
    results["load_at_end"] = os.getloadavg()
    results["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    save(results, out_results)
    return results


def save(results: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1, default=str))
    os.replace(tmp, path)


def sessions_task() -> str | None:
    """The project's task that writes the sessions (its CPU beside plain Spark's session windows)."""
    from bench.compare import USER_SESSIONS
    from lakehouse import catalog

    names = {spec.name for spec in catalog.tables()}
    return catalog.get(USER_SESSIONS).task if USER_SESSIONS in names else None


def engine_versions() -> dict:
    from importlib.metadata import version

    return {name: version(name) for name in ("pyspark", "delta-spark", "polars", "deltalake")}


def command_line(options) -> str:
    parts = ["python -m bench.engine_compare", f"--sizes {options.sizes}", f"--reps {options.reps}"]
    if options.contenders != ",".join(CONTENDERS):
        parts.append(f"--contenders {options.contenders}")
    if options.check != "smallest":
        parts.append(f"--check {options.check}")
    if options.code != "head":
        parts.append(f"--code {options.code}")
    if options.baseline:
        parts.append(f"--baseline {options.baseline}")
    return " ".join(parts)


def check_summary(checked: dict) -> str:
    if "error" in checked:
        return checked["error"]
    parts = []
    if "oracle" in checked:
        parts.append("project vs oracle " + ("passed" if checked["oracle"]["ok"] else "FAILED"))
    for contender, outcome in checked["contenders"].items():
        if outcome["ok"]:
            missing = sum(t["status"] == "not implemented" for t in outcome["tables"].values())
            parts.append(
                f"{contender} passed" + (f" ({missing} not implemented)" if missing else "")
            )
        else:
            problems = [t["detail"] for t in outcome["tables"].values() if not t["ok"]] or [
                outcome.get("detail", "")
            ]
            parts.append(f"{contender} FAILED ({'; '.join(problems)})")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1M,5M", help="events per dataset, e.g. 1M,5M")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument(
        "--contenders", default=",".join(CONTENDERS), help=f"a subset of {','.join(CONTENDERS)}"
    )
    parser.add_argument(
        "--check",
        choices=("smallest", "all", "none"),
        default="smallest",
        help="compare the tables with the project's (and the project's with the oracle) at these sizes",
    )
    parser.add_argument(
        "--code",
        choices=("head", "worktree"),
        default="head",
        help="the lakehouse code the Spark contenders import: HEAD's, exported, or the files on disk",
    )
    parser.add_argument(
        "--baseline",
        help="also run the project at this commit (contender 'baseline'), for a change's before/after",
    )
    parser.add_argument("--data-dir", default=str(DATA))
    parser.add_argument("--work-dir", default=str(WORK))
    parser.add_argument(
        "--keep", action="store_true", help="keep the last run's tables of every contender"
    )
    parser.add_argument(
        "--timeout", type=float, default=RUN_TIMEOUT, help="seconds before a run is killed"
    )
    parser.add_argument("--out", help="render that Markdown file (BENCHMARKS.md) from the results")
    parser.add_argument("--summary", help="update this benchmark's keys in that JSON file")
    parser.add_argument(
        "--from-results", help="save and render an earlier run's results.json instead of measuring"
    )
    parser.add_argument(
        "--note", action="append", default=[], help="a paragraph about this run for the section"
    )
    options = parser.parse_args(argv)
    if options.from_results:
        results = json.loads(Path(options.from_results).read_text())
        if options.note:
            results["notes"] = options.note
            save(results, Path(options.from_results))
    else:
        results = measure(options, Path(options.work_dir) / "results.json")
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
    main()
