"""The sessions task beside Spark's own ``session_window`` on the same silver (issue 39).

Usage (``make bench-sessions-compare`` runs it):
    python -m bench.sessions_compare [--events 1M] [--baseline REV[,REV...]] [--reps 1] \\
        [--out BENCHMARKS.md] [--summary bench/results/summary.json]
    python -m bench.sessions_compare --from-results RESULTS.json --out BENCHMARKS.md  # save, render

Silver is built once per size (``.local/bench/sessions/data-<size>``: the generator's hours, 3 of
them, then the pipeline up to silver) and shared read-only by every contender. Each contender runs
in a fresh process of its own (CPU of its whole tree from /proc when its work ended: Python, JVM,
the JVM's Python workers, start-up included), into a fresh lakehouse whose silver is that one:
``project`` (the sessions task of the work tree, one run), ``baseline@COMMIT`` (the same task with
``include/`` as of each REV: the steps of a change side by side) and ``native`` (a minimal batch job: ``session_window`` with the same
figures per session, written to Delta). Every contender's closed and open sessions are compared
with the oracle's row for row (id, user, start, end and every figure); the state's rows and bytes
after the run are read back with the state data source.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from bench.compare import session_figures
from bench.harness import (
    BENCH_SPARK_CONF,
    become_subreaper,
    code_snapshot,
    git,
    local_driver,
    median,
    parse_size,
    proc_stats,
    run_worker,
    worker_main,
)
from bench.render import publish
from bench.sessions_runs import (
    PROJECT_DIR,
    SEED,
    SESSIONS,
    SESSIONS_TABLE,
    SILVER,
    SILVER_TABLE,
    START,
)
from lakehouse import catalog, runner
from lakehouse.config import Lakehouse
from lakehouse_tools.generator import write_campaigns, write_hours

COMPARE_HOURS = 3
PROJECT, BASELINE, NATIVE = "project", "baseline", "native"
# where the native job writes, under its root (no catalog table)
NATIVE_TABLE = "tables/gold/native_sessions"


def _spark():
    return local_driver("bench-sessions-compare", BENCH_SPARK_CONF)


def prepare(spec: dict) -> dict:
    """The data of one size: the generator's hours and the pipeline up to silver."""
    lakehouse = Lakehouse(root=spec["root"])
    write_campaigns(lakehouse, seed=SEED)
    write_hours(lakehouse, START, COMPARE_HOURS, spec["events"] / (COMPARE_HOURS * 3600), SEED)
    _spark()
    for entry in catalog.tasks():  # in DAG order: the dimension and bronze come before silver
        runner.run(entry.task, ["--lakehouse-root", lakehouse.root])
        if entry.task == SILVER:
            return {}


def run_project(root: str) -> dict:
    """The sessions task, one run over all of silver (what the hourly DAG runs)."""
    _spark()
    return runner.run(SESSIONS, ["--lakehouse-root", root]) or {}


def run_native(root: str) -> None:
    """The lean job's sessions (:func:`bench.compare.plain_spark.native_sessions`) over silver,
    written to Delta with their ``closed`` mark."""
    from bench.compare.plain_spark import native_sessions

    silver = _spark().read.format("delta").load(Lakehouse(root=root).table(SILVER_TABLE).path)
    native_sessions(silver, session_figures()).write.format("delta").mode("overwrite").partitionBy(
        "session_date"
    ).save(f"{root}/{NATIVE_TABLE}")


def measure_state(spec: dict) -> dict:
    """The sessions query's state after its run: rows (state data source) and bytes on disk (newest version)."""
    from lakehouse.flows.sessions.processor import STATE_NAME
    from lakehouse.flows.sessions.state import open_sessions_in_state

    spark = _spark()
    target = Lakehouse(root=spec["root"]).table(catalog.get(SESSIONS_TABLE).name)
    checkpoint = target.checkpoint(target.current_generation())
    spark.streams.active  # noqa: B018 - the state reader needs the state store coordinator
    state = spark.read.format("statestore").option("stateVarName", STATE_NAME).load(checkpoint)
    files = [p for p in Path(checkpoint, "state").rglob("*") if p.is_file()]
    return {
        "state_rows": state.count(),
        "state_open_sessions": open_sessions_in_state(spark, checkpoint).count(),
        "state_dir_bytes": sum(p.stat().st_size for p in files),
    }


def _cpu_by_process() -> dict:
    """CPU seconds so far of this process's tree by kind: this driver, its JVM, the JVM's Python workers."""
    stats = proc_stats()
    split = {"driver_python": 0.0, "jvm": 0.0, "python_workers": 0.0}
    todo = [(os.getpid(), "driver_python")]
    while todo:
        pid, kind = todo.pop()
        split[kind] += stats.get(pid, (0, 0.0))[1]
        for child, (parent, _) in stats.items():
            if parent == pid:
                todo.append((child, "jvm" if kind == "driver_python" else "python_workers"))
    return {k: round(v, 1) for k, v in split.items()}


def _with_split(work):
    def run(spec: dict) -> dict:
        result = work(spec["root"]) or {}
        return {"cpu_split": _cpu_by_process(), **result}

    return run


WORKERS = {
    "prepare": prepare,
    "project": _with_split(run_project),
    "native": _with_split(run_native),
    "state": measure_state,
}


def _in_process(kind: str, spec: dict, include: Path) -> dict:
    """Run a worker in a fresh process tree with ``include`` as the project's code: its result,
    wall and CPU seconds. No table-name metastore: the sessions need none, and code from before
    it had none."""
    folder = Path(spec["root"])
    code, wall, cpu, result, log_path = run_worker(
        "bench.sessions_compare", kind, spec, folder, include, 3600, LAKEHOUSE_METASTORE="none"
    )
    if result is None:
        raise RuntimeError(f"{kind} in {spec['root']} failed ({code}); see {log_path}")
    return {"wall_s": wall, "cpu_s": cpu, **result}


def _fresh_root(work: Path, name: str, data: Lakehouse) -> Lakehouse:
    """A lakehouse whose silver is the prepared one (a link: read only), nothing else yet."""
    root = work / "runs" / name
    shutil.rmtree(root, ignore_errors=True)
    lakehouse = Lakehouse(root=str(root))
    silver = Path(lakehouse.table(SILVER_TABLE).path)
    silver.parent.mkdir(parents=True)
    silver.symlink_to(data.table(SILVER_TABLE).path)
    return lakehouse


def _session_keys(path: str, closed: bool | None = None) -> Counter:
    """A sessions table's rows as comparable tuples (id, user, start and end ms, the figures), read by delta-rs."""
    import polars as pl

    frame = pl.read_delta(path)
    if closed is not None:
        frame = frame.filter(pl.col("closed") == closed)
    frame = frame.select(
        "session_id",
        "user_id",
        pl.col("session_start").dt.epoch("ms"),
        pl.col("session_end").dt.epoch("ms"),
        *session_figures(),
    )
    return Counter(frame.iter_rows())


def _oracle_keys(data: Lakehouse) -> tuple[Counter, Counter]:
    from lakehouse_tools.oracle import expected_from_landing

    figures = session_figures()

    def keys(rows: list[dict]) -> Counter:
        return Counter(
            (
                r["session_id"],
                r["user_id"],
                r["start_millis"],
                r["end_millis"],
                *(r[name] for name in figures),
            )
            for r in rows
        )

    sessions = expected_from_landing(data.landing_events, data.landing_campaigns).sessions()
    return keys([s for s in sessions if s["closed"]]), keys(
        [s for s in sessions if not s["closed"]]
    )


def measure(options, argv: list[str]) -> dict:
    """Sessions: the task (now, and at ``--baseline``) beside Spark's ``session_window``, at one or more sizes."""
    become_subreaper()
    work = Path(options.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    head = PROJECT_DIR / "include"
    project = Path(options.project_include or head)
    code = {PROJECT: project, NATIVE: project}
    baselines = []
    for rev in (options.baseline or "").split(","):
        if rev:
            commit, include = code_snapshot(work, rev)
            baselines.append(f"{BASELINE}@{commit}")
            code[baselines[-1]] = include
    wanted = options.contenders.split(",")
    contenders = [
        c
        for c in [*baselines, PROJECT, NATIVE]
        if c in wanted or (BASELINE in wanted and c in baselines)
    ]
    results = {
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M}Z",
        "command": "python -m bench.sessions_compare " + " ".join(argv),
        "baseline": options.baseline,
        "code": {
            label: git("log", "-1", "--format=%s", label.split("@")[1]) for label in baselines
        },
        "load_before": list(os.getloadavg()),
        "sizes": {},
    }
    for label in options.events.split(","):
        data = Lakehouse(root=str(work / f"data-{label}"))
        if not Path(data.table(SILVER_TABLE).path, "_delta_log").is_dir():
            print(f"{label}: generating and building silver in {data.root}", flush=True)
            # With the committed code: silver is the same whatever the work tree holds meanwhile.
            _, committed = code_snapshot(work)
            _in_process("prepare", {"root": data.root, "events": parse_size(label)}, committed)
        closed_truth, open_truth = _oracle_keys(data)
        figures = results["sizes"][label] = {"oracle_closed": sum(closed_truth.values())}
        for rep in range(options.reps):
            for contender in contenders:
                lakehouse = _fresh_root(work, contender, data)
                kind = NATIVE if contender == NATIVE else PROJECT
                run = _in_process(kind, {"root": lakehouse.root}, code[contender])
                entry = figures.setdefault(contender, {"cpu_s": [], "wall_s": []})
                # The live tree's CPU when the task ended (/proc): what the wait for the process
                # tree counts misses most of the Python workers' (pyspark's daemon forks them and
                # they are not reaped through the chain: 1M events, before issue 39's change,
                # 172 CPU-s counted on exit against 468 in /proc, 297 of them the workers').
                split = run["cpu_split"]
                entry["cpu_s"].append(round(max(run["cpu_s"], sum(split.values())), 1))
                entry.setdefault("cpu_s_reaped", []).append(round(run["cpu_s"], 1))
                entry.setdefault("cpu_split", []).append(split)
                entry["wall_s"].append(round(run["wall_s"], 1))
                if run.get("state_memory_bytes") is not None:
                    entry["state_memory_bytes"] = run["state_memory_bytes"]
                if contender == NATIVE:
                    path = f"{lakehouse.root}/{NATIVE_TABLE}"
                    entry["closed_equal"] = _session_keys(path, True) == closed_truth
                    entry["open_equal"] = _session_keys(path, False) == open_truth
                else:
                    closed = _session_keys(lakehouse.table(SESSIONS_TABLE).path)
                    opened = _session_keys(lakehouse.table("gold.open_sessions").path)
                    entry["closed_equal"], entry["open_equal"] = (
                        closed == closed_truth,
                        opened == open_truth,
                    )
                    entry["closed"] = sum(closed.values())
                    state = _in_process("state", {"root": lakehouse.root}, code[contender])
                    entry.update({k: v for k, v in state.items() if k.startswith("state_")})
                print(f"{label} rep {rep + 1} {contender}: {json.dumps(entry)}", flush=True)
        native = median(figures[NATIVE]["cpu_s"]) if NATIVE in figures else None
        for contender in contenders:
            if native and contender != NATIVE:
                figures[contender]["ratio_to_native"] = round(
                    median(figures[contender]["cpu_s"]) / native, 2
                )
    results["load_after"] = list(os.getloadavg())
    return results


def _load(average: list | None) -> str:
    return ", ".join(f"{x:.1f}" for x in average or [])


def _median(values: list) -> float:
    return round(median(values), 1)


def render(results: dict) -> str:
    """The section: one row per size and contender."""
    code = results.get("code", {})
    lines = [
        "; ".join(
            f"`{run.get('command', 'python -m bench.sessions_compare')}` ({', '.join(run['sizes'])}: "
            f"{run['date']}, load average {_load(run.get('load_before'))} before, "
            f"{_load(run.get('load_after'))} after)"
            for run in results.get("runs", [results])
        )
        + ". 2 cores shared. Silver of "
        f"{COMPARE_HOURS} generated hours built once per size; each contender one fresh process tree over "
        "it (Python, its JVM, the JVM's Python workers, JVM start included), CPU-s from /proc when its "
        "work ended: the sessions task as of each commit (one run: a micro-batch with the events, one "
        "that closes sessions, then the open sessions' rewrite) and `native`, a minimal batch job of "
        "Spark's `session_window` with the same figures per session written to Delta. Every "
        "contender's closed and open sessions compared row for row with the oracle's; the task's "
        "state after the run read back with the state data source.",
        *(["", results["note"]] if results.get("note") else []),
        "",
        "| events | contender | CPU-s | JVM | Python workers | driver | wall s | × native | closed = oracle "
        "| open = oracle | state rows | state on disk MB |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |",
    ]
    for size, measured in results["sizes"].items():
        for contender in (c for c in measured if isinstance(measured[c], dict)):
            entry = measured[contender]
            split = entry["cpu_split"][len(entry["cpu_split"]) // 2]
            name = contender
            if contender in code:
                name = f"{contender.split('@')[1]} {code[contender]}"
            state_mb = (
                f"{entry['state_dir_bytes'] / 1e6:.1f}" if entry.get("state_dir_bytes") else ""
            )
            lines.append(
                f"| {size} | {name} | {_median(entry['cpu_s'])} | {split['jvm']} | "
                f"{split['python_workers']} | {split['driver_python']} | {_median(entry['wall_s'])} | "
                f"{entry.get('ratio_to_native', '')} | {'yes' if entry.get('closed_equal') else 'NO'} | "
                f"{'yes' if entry.get('open_equal') else 'NO'} | {entry.get('state_rows', '')} | {state_mb} |"
            )
    return "\n".join(lines)


def figures(results: dict) -> dict:
    """The summary keys. They name the project by its newest code measured: ``project`` (the work
    tree) if it ran, else the last ``--baseline``."""
    figures = {}
    for size, measured in results["sizes"].items():
        ours = [c for c in measured if isinstance(measured[c], dict) and c != NATIVE]
        newest = PROJECT if PROJECT in ours else (ours[-1] if ours else None)
        key = size.lower()
        if NATIVE in measured:
            figures[f"sessions_native_spark_cpu_s_{key}"] = _median(measured[NATIVE]["cpu_s"])
        if newest:
            entry = measured[newest]
            figures[f"sessions_cpu_s_{key}"] = _median(entry["cpu_s"])
            if "ratio_to_native" in entry:
                figures[f"sessions_ratio_to_native_spark_{key}"] = entry["ratio_to_native"]
            for name in ("state_rows", "state_dir_bytes", "state_memory_bytes"):
                if entry.get(name) is not None:
                    figures[f"sessions_{name.replace('_dir', '')}_{key}"] = entry[name]
    return figures


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", default="1M", help="comma-separated sizes, e.g. 1M,5M")
    parser.add_argument("--baseline", help="also run the task with include/ as of these commits")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument(
        "--contenders",
        default=f"{BASELINE},{PROJECT},{NATIVE}",
        help=f"of {BASELINE} (every --baseline), {PROJECT}, {NATIVE}",
    )
    parser.add_argument("--work-dir", default=str(PROJECT_DIR / ".local" / "bench" / "sessions"))
    parser.add_argument("--project-include", help="the project's code (default: include/)")
    parser.add_argument("--out", help="render that Markdown file (BENCHMARKS.md) from the results")
    parser.add_argument("--summary", help="update this scenario's keys in that JSON file")
    parser.add_argument("--from-results", help="save and render an earlier run's results")
    options = parser.parse_args(argv)
    if options.from_results:
        results = json.loads(Path(options.from_results).read_text())
    else:
        results = measure(options, argv)
        Path(options.work_dir, "results.json").write_text(json.dumps(results, indent=2) + "\n")
    publish(
        render(results),
        options.out,
        options.summary,
        figures(results),
        benchmark="sessions_compare",
        results=results,
        per_table=False,
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker_main(WORKERS, sys.argv[2:])
    else:
        main(sys.argv[1:])
