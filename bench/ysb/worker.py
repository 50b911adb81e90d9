"""What runs inside a measured process: the pipeline's tasks, the plain batch baseline, each measurement.

Usage (:mod:`bench.ysb.benchmark` starts one per configuration, so JVM start-up is in no figure):
    python -m bench.ysb.worker pipeline|backfill|growth|tune SPEC.json

The spec gives the master, the Spark settings laid over ``DEFAULT_CONF``, the data and where to
write the JSON result. Tasks run in this process through :func:`lakehouse.runner.run` (as the
tests do), one after the other in DAG order, each timed. The measurements are plain functions of
a SparkSession, so tests/bench runs them on tiny data with the test session.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path

from bench.ysb.data import GROWTH_START, SEED, Dataset, fresh_lakehouse, write_hour
from bench.ysb.measuring import (
    ProgressRecorder,
    cores_of,
    durations_by_job,
    jvm_pid,
    peak_rss_mb,
    reset_peak_rss,
)
from bench.ysb.tasks import (
    BATCH,
    LOADED_ONCE,
    PIPELINE,
    SNAPSHOTS,
    STREAMED,
    data_tables,
    merge_table,
    sized_tables,
)
from lakehouse import catalog, runner
from lakehouse.catalog import Write
from lakehouse.config import Lakehouse
from lakehouse_tools.generator import write_campaigns

BENCH_SPARK_CONF = {"spark.ui.enabled": "false", "spark.driver.memory": "2g"}
WORKERS = ("pipeline", "backfill", "growth", "tune")


# ----------------------------------------------------------------------------------------------
# The pipeline's tasks, and the plain batch job over the same transforms


def run_tasks(
    lakehouse: Lakehouse,
    tasks: tuple[str, ...],
    args: tuple[str, ...] = (),
    recorder: ProgressRecorder | None = None,
) -> dict:
    """Run ``tasks`` one after the other in this process (``args`` go to those with a batch form); seconds per task.

    The jobs run on this process's driver, whatever ``LAKEHOUSE_ENGINE`` says: this benchmark
    measures a driver's queries through its listener (bench/engine_runs.py measures the engine).
    """
    seconds, queries = {}, 0
    engine_before = os.environ.get("LAKEHOUSE_ENGINE")
    os.environ["LAKEHOUSE_ENGINE"] = "local"
    try:
        for task in tasks:
            table = catalog.task(task)
            extra = args if table.batch else ()
            started = time.perf_counter()
            summary = runner.run(task, ["--lakehouse-root", lakehouse.root, *extra]) or {}
            seconds[task] = time.perf_counter() - started
            # An incremental run of a streamed table is one query, unless nothing was new (none started).
            queries += table.streamed and not extra and "not_started" not in summary
    finally:
        if engine_before is None:
            os.environ.pop("LAKEHOUSE_ENGINE", None)
        else:
            os.environ["LAKEHOUSE_ENGINE"] = engine_before
    result = {"seconds": seconds}
    if recorder is not None:
        result["progress"] = durations_by_job(recorder.take(queries))
    return result


def source_rows(spark, landing: Lakehouse, table: catalog.TableSpec):
    """A source-fed table's input read in batch: its landing file (a dimension) or its landing lines."""
    from pyspark.sql import functions as F

    if table.write is Write.OVERWRITE:
        return spark.read.csv(
            landing.landing(table.source), header=True, schema=table.spark_schema()
        )
    return spark.read.text(f"{landing.landing(table.source)}/*/*/*.jsonl").select(
        "value",
        F.col("_metadata.file_path").alias("source_file"),
        F.current_timestamp().alias("ingested_at"),
    )


def plain_batch(
    spark, dataset_lakehouse: Lakehouse, out: Lakehouse, reuse: Lakehouse | None = None
) -> dict:
    """Every task's transform over whole tables in batch, each table written with a plain overwrite.

    The transforms of the catalog, in DAG order; no streaming, no checkpoints, no MERGE, no
    replaceWhere (sessions: the batch form over all of silver, no state). A table is read back from ``out`` by the tables downstream of it. A MERGE_NEW
    table's accepted rows (one per key) go to the table and its rejected rows to its quarantine,
    as its stream does; its metrics record is left out. With ``reuse``, the tasks without a batch
    form are not run: their tables are read from ``reuse`` (what a backfill starts from). Returns
    wall seconds per task.
    """
    from lakehouse.flows.merge import accepted, rejected
    from lakehouse.flows.sessions import whole_sessions

    where = {}

    def write(rows, table: catalog.TableSpec) -> None:
        where[table.name] = out.table(table.name)
        rows.write.format("delta").mode("overwrite").partitionBy(*table.partition_by).save(
            where[table.name].path
        )

    seconds = {}
    for table in catalog.tasks():
        if reuse is not None and not table.batch:
            where.update(
                {
                    written.name: reuse.table(written.name)
                    for written in catalog.written_by_task(table)
                }
            )
            continue
        started = time.perf_counter()
        inputs = [spark.read.format("delta").load(where[name].path) for name in table.upstream]
        if not inputs:
            inputs = [source_rows(spark, dataset_lakehouse, table)]
        if table.write is Write.MERGE_NEW:
            classified = table.transform(*inputs).persist()
            try:
                write(accepted(classified, table), table)
                quarantine = catalog.side(table, "quarantine")
                write(rejected(classified, quarantine), quarantine)
            finally:
                classified.unpersist()
        elif table.write is Write.SESSIONS:
            closed, still_open = whole_sessions(inputs[0], table)
            write(closed, table)
            write(still_open, catalog.side(table, "open"))
        else:
            write(table.transform(*inputs), table)
        seconds[table.task] = time.perf_counter() - started
    return {"seconds": seconds}


# ----------------------------------------------------------------------------------------------
# Measurements (each a function of a session, so the smoke test can call it)


def measure_pipeline(
    spark, dataset: Dataset, work: Path, reps: int, master: str, profile: bool = False
) -> dict:
    """Per repetition, side by side: the incremental pipeline (tasks in DAG order) and the plain batch job.

    Their order alternates between repetitions, so a load spike on the shared machine does not
    always hit the same one. Each run starts from an empty lakehouse.
    """
    recorder = ProgressRecorder(spark)
    pid = jvm_pid(spark)
    runs = {"incremental": [], "batch": []}
    for rep in range(reps):
        order = ("incremental", "batch") if rep % 2 == 0 else ("batch", "incremental")
        for kind in order:
            lakehouse = fresh_lakehouse(work / f"{kind}", dataset)
            reset_peak_rss(pid)
            if kind == "incremental":
                run = run_tasks(lakehouse, PIPELINE, recorder=recorder)
            else:
                run = plain_batch(spark, Lakehouse(dataset.root), lakehouse)
            run["peak_rss_mb"] = peak_rss_mb(pid)
            runs[kind].append(run)
    recorder.close()
    result = {"master": master, "cores": cores_of(master), "dataset": asdict(dataset), "runs": runs}
    if profile:
        result["profile"] = profile_merge(
            spark, Lakehouse(str(work / "incremental")), work / "profile"
        )
    for kind in runs:
        shutil.rmtree(work / kind, ignore_errors=True)
    return result


def profile_merge(spark, lakehouse: Lakehouse, scratch: Path) -> dict:
    """Where the MERGE_NEW table's (silver's) time goes, step by step, each step to a noop sink.

    Each step re-runs the ones before it, so the difference between two rows is one step's cost.
    The parsing steps mirror its transform's: a Variant parse of the raw line, and the second
    parse of the same line as a map (for ``rescued_data``).
    """
    from pyspark.sql import functions as F

    from lakehouse.flows.merge import accepted

    table = merge_table()
    streamed, *static = [
        spark.read.format("delta").load(lakehouse.table(name).path) for name in table.upstream
    ]
    variant = F.try_parse_json("raw_line")
    steps: dict[str, Callable] = {
        f"scan {table.upstream[0]}": lambda: streamed,
        "+ parse the line to a Variant (try_parse_json)": lambda: streamed.select(
            F.schema_of_variant(variant)
        ),
        "+ parse it again as a map (from_json, for rescued_data)": lambda: streamed.select(
            F.schema_of_variant(variant), F.size(F.from_json("raw_line", "map<string,string>"))
        ),
        f"{table.transform.__name__} (all checks, join with {', '.join(table.upstream[1:])})": lambda: (
            table.transform(streamed, *static)
        ),
        f"+ valid + dedup on {table.key} (shuffle)": lambda: accepted(
            table.transform(streamed, *static), table
        ),
    }
    seconds = {}
    for step, frame in steps.items():
        started = time.perf_counter()
        frame().write.format("noop").mode("overwrite").save()
        seconds[step] = time.perf_counter() - started
    started = time.perf_counter()
    accepted(table.transform(streamed, *static), table).write.format("delta").mode(
        "overwrite"
    ).partitionBy(*table.partition_by).save(str(scratch / "merge_table"))
    seconds["+ Delta write (plain overwrite, no MERGE)"] = time.perf_counter() - started
    shutil.rmtree(scratch, ignore_errors=True)
    return seconds


def measure_backfill(spark, dataset: Dataset, work: Path, reps: int, master: str) -> dict:
    """A batch-mode backfill of the tasks with a batch form over the dataset's hours vs the plain batch job.

    The other tasks (the dimension, bronze) run once, incrementally, untimed; then, alternating,
    the batch tasks run in batch mode (``--mode batch --start --end``: replaceWhere of every hour)
    and the plain batch job reads the same tables and overwrites its own.
    """
    lakehouse = fresh_lakehouse(work / "backfill", dataset)
    run_tasks(lakehouse, LOADED_ONCE)
    interval = (
        "--mode",
        "batch",
        "--start",
        f"{dataset.start_time:%Y-%m-%dT%H:%MZ}",
        "--end",
        f"{dataset.end_time:%Y-%m-%dT%H:%MZ}",
    )
    runs = {"backfill": [], "batch": []}
    for rep in range(reps):
        order = ("backfill", "batch") if rep % 2 == 0 else ("batch", "backfill")
        for kind in order:
            if kind == "backfill":
                runs[kind].append(run_tasks(lakehouse, BATCH, interval))
            else:
                out = fresh_lakehouse(work / "plain", dataset)
                runs[kind].append(plain_batch(spark, Lakehouse(dataset.root), out, reuse=lakehouse))
    for folder in ("backfill", "plain"):
        shutil.rmtree(work / folder, ignore_errors=True)
    return {"master": master, "cores": cores_of(master), "dataset": asdict(dataset), "runs": runs}


def measure_growth(
    spark,
    work: Path,
    runs: int,
    eps: float,
    master: str,
    idle_reps: int = 3,
    files_per_hour: int = 4,
    on_progress: Callable[[dict], None] | None = None,
) -> dict:
    """``runs`` consecutive hourly incremental runs of the streamed tasks, each over one new hour of ``eps`` events/s.

    After the second run, ``idle_reps`` runs with nothing new, each after clearing Delta's snapshot
    cache (as a new JVM would start): their wall time, and how long loading every table's snapshot
    takes. ``on_progress`` gets the result so far after every run (a long series can be cut short).
    """
    recorder = ProgressRecorder(spark)
    pid = jvm_pid(spark)
    data = work / "data"
    shutil.rmtree(data, ignore_errors=True)
    lakehouse = Lakehouse(str(data))
    write_campaigns(lakehouse, SEED)
    run_tasks(lakehouse, SNAPSHOTS)
    reset_peak_rss(pid)
    hourly, idle = [], []
    result = {
        "master": master,
        "cores": cores_of(master),
        "eps": eps,
        "runs": hourly,
        "idle": idle,
        "runs_planned": runs,
        "tables": {},
        "peak_rss_mb": None,
    }
    for index in range(runs):
        lines = write_hour(
            lakehouse.root, GROWTH_START + timedelta(hours=index), eps, files_per_hour
        )
        run = run_tasks(lakehouse, STREAMED, recorder=recorder)
        run["lines"] = lines
        hourly.append(run)
        if index == min(1, runs - 1):
            idle.extend(measure_idle(spark, lakehouse, recorder) for _ in range(idle_reps))
        result["peak_rss_mb"] = peak_rss_mb(pid)
        if on_progress:
            on_progress(result)
    result["tables"] = table_sizes(spark, lakehouse)
    recorder.close()
    shutil.rmtree(data, ignore_errors=True)
    return result


def clear_delta_cache(spark) -> None:
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


def measure_idle(spark, lakehouse: Lakehouse, recorder: ProgressRecorder) -> dict:
    """One run of every task with no new data, from a cold Delta snapshot cache."""
    from delta.tables import DeltaTable

    clear_delta_cache(spark)
    snapshot = {}
    for name in data_tables():
        started = time.perf_counter()
        _ = (
            DeltaTable.forPath(spark, lakehouse.table(name).path).toDF().schema
        )  # resolves the snapshot
        snapshot[name] = time.perf_counter() - started
    clear_delta_cache(spark)
    run = run_tasks(lakehouse, PIPELINE, recorder=recorder)
    run["snapshot_seconds"] = snapshot
    return run


def table_sizes(spark, lakehouse: Lakehouse) -> dict:
    """Files and log versions of the streamed tables after the growth runs."""
    from delta.tables import DeltaTable

    sizes = {}
    for name in sized_tables():
        detail = DeltaTable.forPath(spark, lakehouse.table(name).path).detail().collect()[0]
        version = (
            DeltaTable.forPath(spark, lakehouse.table(name).path).history(1).collect()[0].version
        )
        sizes[name] = {"files": detail.numFiles, "bytes": detail.sizeInBytes, "version": version}
    return sizes


# ----------------------------------------------------------------------------------------------
# The worker process: one measurement, one JVM, one master


def main(kind: str, spec_path: str) -> None:
    """Run one measurement in this process with the spec's master and configuration; write JSON."""
    if kind not in WORKERS:
        raise SystemExit(f"unknown worker {kind!r}; one of {', '.join(WORKERS)}")
    spec = json.loads(Path(spec_path).read_text())
    import lakehouse.spark as lakehouse_spark

    # A tuning variant replaces DEFAULT_CONF in this process only: the tasks' own
    # build_spark_session() re-applies DEFAULT_CONF to the running session on every call.
    lakehouse_spark.DEFAULT_CONF.update(spec.get("conf", {}))
    spark = lakehouse_spark.build_spark_session(
        f"ysb-bench-{kind}",
        {**BENCH_SPARK_CONF, "spark.master": spec["master"], **spec.get("conf", {})},
    )
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(spec["work"])
    if spec.get("warmup"):
        # The first queries of a JVM load and JIT-compile classes: not part of any figure.
        measure_pipeline(spark, Dataset(**spec["warmup"]), work / "warmup", 1, spec["master"])
        shutil.rmtree(work / "warmup", ignore_errors=True)
    if kind == "pipeline":
        result = measure_pipeline(
            spark,
            Dataset(**spec["dataset"]),
            work,
            spec["reps"],
            spec["master"],
            spec.get("profile", False),
        )
    elif kind == "backfill":
        result = measure_backfill(
            spark, Dataset(**spec["dataset"]), work, spec["reps"], spec["master"]
        )
    elif kind == "growth":

        def partial(so_far: dict) -> None:
            Path(spec["out"]).with_suffix(".partial.json").write_text(
                json.dumps(so_far, default=str)
            )

        result = measure_growth(
            spark,
            work,
            spec["runs"],
            spec["eps"],
            spec["master"],
            spec.get("idle_reps", 3),
            on_progress=partial,
        )
    else:
        result = {
            "pipeline": measure_pipeline(
                spark, Dataset(**spec["dataset"]), work / "pipeline", 1, spec["master"]
            ),
            "growth": measure_growth(
                spark, work / "growth", spec["runs"], spec["eps"], spec["master"], idle_reps=0
            ),
        }
    result["jvm_peak_rss_mb"] = peak_rss_mb(jvm_pid(spark))
    Path(spec["out"]).write_text(json.dumps(result, default=str))
    spark.stop()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(f"usage: python -m bench.ysb.worker {'|'.join(WORKERS)} SPEC.json")
    main(sys.argv[1], sys.argv[2])
