"""What OpenLineage costs an hourly DAG run with nothing new: lineage off, on, and on with the
Airflow provider emitting in a thread instead of a forked process, side by side in one run.

Usage (``make bench-lineage`` runs it):
    python -m bench.lineage_overhead [--reps 3] [--out BENCHMARKS.md] [--summary bench/results/summary.json]

One engine of its own started with Spark's OpenLineage listener (its settings are read when its
JVM starts), one Airflow home and one lakehouse: one generated hour, run once untimed (lineage on),
then `airflow dags test ysb_hourly` with nothing new, the variants alternated, each run its own
logical hour:

- ``off``: no Airflow transport (the provider disabled) and no parent keys for Spark
  (``LAKEHOUSE_LINEAGE`` unset for Airflow); the engine's listener stays on, idle: a run with
  nothing new starts no query;
- ``on``: the provider writing its events to a file, the operators passing parent keys;
- ``on_thread``: the same with ``[openlineage] execute_in_thread``.

Measured: the command's wall seconds, the CPU seconds of its whole process tree (reaped), the
engine's process tree CPU over the run, and the Airflow events each run wrote. Afterwards every
table is read back through the engine and must equal the oracle (tests/helpers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.harness import become_subreaper, markers, run_tree, tree_cpu
from bench.render import publish

PROJECT_DIR = Path(__file__).resolve().parents[1]
WORK = PROJECT_DIR / ".local" / "bench" / "lineage"
START = datetime(2026, 11, 20, 0, tzinfo=UTC)
VARIANTS = ("off", "on", "on_thread")
SCRIPT = "bench/lineage_overhead.py"


def log(line: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {line}", flush=True)


def variant_env(base: dict, variant: str, events: Path) -> dict:
    """The Airflow command's environment for a variant (lineage settings only differ)."""
    env = {k: v for k, v in base.items() if not k.startswith("AIRFLOW__OPENLINEAGE__")}
    env.pop("LAKEHOUSE_LINEAGE", None)
    if variant == "off":
        return {**env, "AIRFLOW__OPENLINEAGE__DISABLED": "true"}
    transport = {"type": "file", "log_file_path": str(events), "append": True}
    env.update(
        LAKEHOUSE_LINEAGE="1",
        AIRFLOW__OPENLINEAGE__NAMESPACE="ysb-lakehouse",
        AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(transport),
    )
    if variant == "on_thread":
        env["AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD"] = "true"
    return env


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def measure(reps: int) -> dict:
    from airflow_env import airflow_environment, migrate
    from helpers import assert_tables_match_oracle, private_engine

    from lakehouse.config import Lakehouse
    from lakehouse.spark import build_spark_session
    from lakehouse_tools.generator import write_campaigns, write_hours

    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    lakehouse = Lakehouse(root=str(WORK / "lakehouse"))
    write_campaigns(lakehouse, seed=7)
    write_hours(lakehouse, START, 1, events_per_second=0.05, seed=7)
    events = WORK / "airflow-events.jsonl"
    runs: list[dict] = []
    os.environ.update(
        LAKEHOUSE_LINEAGE="1",
        LAKEHOUSE_LINEAGE_DIR=str(WORK / "spark-events"),
        LAKEHOUSE_METASTORE="none",
        LAKEHOUSE_ENGINE="connect",
    )
    with private_engine(WORK / "engine", os.environ.__setitem__):
        engine_pid = int((WORK / "engine" / "supervisor.pid").read_text())
        migrate(WORK / "airflow_home")
        base = airflow_environment(WORK / "airflow_home", lakehouse)
        become_subreaper()
        order = ["on"] + [v for _ in range(reps) for v in VARIANTS]  # the first run: untimed data
        for n, variant in enumerate(order):
            logical = (START + timedelta(hours=1 + n)).isoformat()
            before_events, engine_before = lines(events), tree_cpu(engine_pid)
            code, wall, cpu = run_tree(
                ["airflow", "dags", "test", "ysb_hourly", logical],
                variant_env(base, variant, events),
                WORK / f"run-{n}-{variant}.log",
                timeout=1800,
            )
            if code != 0:
                raise SystemExit(f"run {n} ({variant}) failed: see {WORK}/run-{n}-{variant}.log")
            run = {
                "variant": variant,
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "engine_cpu_s": round(tree_cpu(engine_pid) - engine_before, 2),
                "airflow_events": lines(events) - before_events,
            }
            log(f"run {n} {variant}: {run}")
            if n:  # the first run processed the data: not a no-new-data figure
                runs.append(run)
        spark = build_spark_session(
            "bench-lineage-check", engine_kind="connect", outlives_jobs=True
        )
        try:
            assert_tables_match_oracle(spark, lakehouse)
        finally:
            spark.stop()
        log("tables equal the oracle")
    return {"reps": reps, "runs": runs}


def _median(results: dict, variant: str, key: str) -> float:
    return round(statistics.median(r[key] for r in results["runs"] if r["variant"] == variant), 2)


def figures(results: dict) -> dict:
    off = _median(results, "off", "wall_s")
    return {
        "lineage_no_new_data_wall_s_added": round(_median(results, "on", "wall_s") - off, 2),
        "lineage_no_new_data_wall_s_added_in_thread": round(
            _median(results, "on_thread", "wall_s") - off, 2
        ),
    }


def render(results: dict) -> str:
    """The section, from the saved results (bench.render)."""
    begin, end = markers(SCRIPT)

    def row(label: str, key: str, digits: int = 2) -> str:
        off, on, thread = (_median(results, v, key) for v in VARIANTS)
        cells = (f"{x:.{digits}f}" for x in (off, on, thread))
        return f"| {label} | {' | '.join(cells)} | {on - off:+.{digits}f} | {thread - off:+.{digits}f} |"

    return "\n".join(
        [
            begin,
            f"`python -m bench.lineage_overhead --reps {results['reps']}`, measured "
            f"{results['measured_at'][:10]}: one engine with Spark's listener on, `airflow dags test "
            f"ysb_hourly` with nothing new, the variants alternated, medians of {results['reps']} "
            "runs each; every table equalled the oracle afterwards. Other engineers' tests kept "
            "the machine busy: the differences, measured alternately, are what counts. *Leaves "
            "out* runs with data (the listener's analysis of each query's plan).",
            "",
            "| no-new-data DAG run | off | on | on, in a thread | on − off | in a thread − off |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
            row("wall s", "wall_s"),
            row("CPU s, the `airflow` command's process tree", "cpu_s"),
            row("CPU s, the engine's process tree", "engine_cpu_s"),
            row("Airflow events written", "airflow_events", digits=0),
            end,
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out")
    parser.add_argument("--summary")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    results = {**measure(args.reps), "measured_at": datetime.now(UTC).isoformat(timespec="seconds")}
    publish(
        render(results),
        args.out,
        args.summary,
        figures(results),
        benchmark="lineage_overhead",
        results=results,
        per_table=False,
    )
    log(f"done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
