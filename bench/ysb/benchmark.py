"""The whole benchmark: data, then every measurement in order, one worker process per configuration.

Each measurement that needs a Spark session runs in ``python -m bench.ysb.worker`` with its own
JVM and master; results are saved to ``<work dir>/results.json`` after every stage, so a run cut
short can be resumed (``--resume``) or rendered as it is (``--report-only``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from bench.ysb.data import dataset_for, ensure_dataset
from bench.ysb.measuring import cores_of, machine_info, parse_size
from bench.ysb.overhead import (
    PROJECT_DIR,
    dag_runs_from_db,
    measure_dag_idle,
    measure_spark_submit,
    spark_env,
)

STAGES = ("pipeline", "backfill", "growth", "overhead", "tuning")
MEASUREMENTS = ("pipeline", "backfill", "growth", "spark_submit", "dag_idle", "tuning")


def run_worker(kind: str, spec: dict, work: Path, log: Callable[[str], None]) -> dict:
    """Run a worker subprocess and return its JSON result (its output goes to a log file)."""
    work.mkdir(parents=True, exist_ok=True)
    spec = {**spec, "work": str(work), "out": str(work / "result.json")}
    spec_path = work / "spec.json"
    spec_path.write_text(json.dumps(spec))
    log_path = work / "worker.log"
    started = time.perf_counter()
    with log_path.open("w") as out:
        result = subprocess.run(
            [sys.executable, "-m", "bench.ysb.worker", kind, str(spec_path)],
            cwd=PROJECT_DIR,
            env=spark_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    if result.returncode != 0:
        tail = "\n".join(log_path.read_text().splitlines()[-30:])
        raise RuntimeError(f"worker {kind} failed ({log_path}):\n{tail}")
    log(f"  worker {kind} {spec.get('master', '')} done in {time.perf_counter() - started:.0f} s")
    return json.loads((work / "result.json").read_text())


def parse_variants(text: str) -> dict[str, dict[str, str]]:
    """``base;parts2:spark.sql.shuffle.partitions=2,k=v`` -> {"base": {}, "parts2": {...}}."""
    variants = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        name, _, confs = item.partition(":")
        variants[name] = dict(pair.split("=", 1) for pair in confs.split(",") if pair)
    return variants


def save(results: dict, work: Path) -> None:
    (work / "results.json").write_text(json.dumps(results, indent=1, default=str))


def run_benchmark(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict:
    """Every measurement in order; the result dict that :func:`bench.ysb.report.render_report` turns into markdown."""
    work = Path(args.work_dir)
    data_dir = work / "data"
    results: dict = {
        "command": args.command,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "params": {k: v for k, v in vars(args).items() if k != "command"},
    }
    if args.resume and (work / "results.json").exists():
        # Keep what an earlier (interrupted) run measured; run only the stages asked for.
        earlier = json.loads((work / "results.json").read_text())
        results = {
            **earlier,
            "resumed": results["started"],
            "command": f"{earlier['command']}; {args.command}",
        }
    stages = set(args.stages.split(","))
    started = time.perf_counter() - results.get("elapsed_s", 0.0)

    log("Generating data (lakehouse_tools.generator.write_hours) ...")
    # Only the data the chosen stages read.
    sizes = (
        [dataset_for(data_dir, parse_size(s)) for s in args.sizes.split(",")]
        if stages & {"pipeline", "tuning"}
        else []
    )
    warmup = asdict(ensure_dataset(data_dir, 1, 0.5, 4)) if args.warmup else None
    backfill = ensure_dataset(data_dir, 24, args.backfill_eps, 4) if "backfill" in stages else None
    idle_data = ensure_dataset(data_dir, 2, 0.1, 4) if "overhead" in stages else None
    log(
        f"  datasets: {', '.join(d.label for d in sizes)}; backfill {backfill.label if backfill else '-'}; "
        f"{time.perf_counter() - started:.0f} s"
    )
    masters = args.masters.split(",")

    if "pipeline" in stages:
        results["pipeline"] = []
    for dataset in sizes if "pipeline" in stages else ():
        for master in masters:
            log(f"Pipeline {dataset.label} events, {master}, {args.reps} rep(s) ...")
            spec = {
                "master": master,
                "dataset": asdict(dataset),
                "reps": args.reps,
                "warmup": warmup,
                "profile": master == masters[-1] and dataset == sizes[0],
            }
            results["pipeline"].append(
                run_worker(
                    "pipeline", spec, work / f"pipeline-{dataset.label}-{cores_of(master)}", log
                )
            )
            save(results, work)

    if "backfill" in stages:
        log(f"Backfill of 24 hours ({backfill.label} events), {masters[-1]} ...")
        spec = {
            "master": masters[-1],
            "dataset": asdict(backfill),
            "reps": args.reps,
            "warmup": warmup,
        }
        results["backfill"] = run_worker("backfill", spec, work / "backfill", log)
        save(results, work)

    if "growth" in stages:
        log(f"Cost growth: {args.growth_runs} hourly runs at {args.growth_eps} events/s ...")
        spec = {
            "master": masters[-1],
            "runs": args.growth_runs,
            "eps": args.growth_eps,
            "idle_reps": args.reps,
            "warmup": warmup,
        }
        results["growth"] = run_worker("growth", spec, work / "growth", log)
        save(results, work)

    if "overhead" in stages:
        if not (args.resume and results.get("spark_submit")):
            log("Fixed overhead: spark-submit of a trivial script ...")
            results["spark_submit"] = measure_spark_submit(args.reps)
            save(results, work)
        if not args.skip_airflow:
            log("Fixed overhead: airflow dags test ysb_hourly with nothing new ...")
            results["dag_idle"] = measure_dag_idle(work / "dag", idle_data, args.reps)
        save(results, work)

    variants = parse_variants(args.variants)
    if len(variants) > 1 and "tuning" in stages:
        log(f"Tuning: {', '.join(variants)} ({args.reps} alternating round(s)) ...")
        results["tuning"] = {
            "size": sizes[0].label,
            "master": masters[-1],
            "runs": args.tune_growth_runs,
            "variants": {name: {"conf": conf, "rounds": []} for name, conf in variants.items()},
        }
        results["tuning"]["parallel"] = args.tune_parallel

        def tune(name: str) -> dict:
            spec = {
                "master": masters[-1],
                "dataset": asdict(sizes[0]),
                "conf": variants[name],
                "runs": args.tune_growth_runs,
                "eps": args.growth_eps,
                "warmup": warmup,
            }
            return run_worker("tune", spec, work / f"tune-{name}", log)

        for rnd in range(args.reps):
            names = list(variants) if rnd % 2 == 0 else list(reversed(variants))
            if args.tune_parallel:
                # All variants at the same moment: on a shared machine they then see the same load.
                with ThreadPoolExecutor(max_workers=len(names)) as pool:
                    outs = dict(zip(names, pool.map(tune, names)))
            else:
                outs = {name: tune(name) for name in names}
            for name in names:
                results["tuning"]["variants"][name]["rounds"].append(outs[name])
            save(results, work)
    results["elapsed_s"] = time.perf_counter() - started
    results["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    results["machine"]["load_average_end"] = os.getloadavg()
    save(results, work)
    return results


def saved_results(work_dir: str, merge: list[str], note: str = "") -> dict:
    """The results saved in ``work_dir``, with the stages measured by the runs in ``merge`` added."""
    results = json.loads((Path(work_dir) / "results.json").read_text())
    for other in merge:
        # Stages measured by another run (e.g. one started at the same time with --stages).
        saved = Path(other) / "results.json"
        extra = (
            json.loads(saved.read_text()) if saved.exists() else {"command": f"(stages in {other})"}
        )
        partial_growth = Path(other) / "growth" / "result.partial.json"
        if not extra.get("growth") and partial_growth.exists():
            extra["growth"] = json.loads(partial_growth.read_text())
        dag_db = Path(other) / "dag" / "airflow_home" / "airflow.db"
        if not extra.get("dag_idle") and dag_db.exists():
            extra["dag_idle"] = dag_runs_from_db(dag_db)
        for key in MEASUREMENTS:
            if key == "pipeline" and extra.get(key):
                results[key] = sorted(
                    [*results.get(key, []), *extra[key]],
                    key=lambda p: (p["dataset"]["lines"], p["cores"]),
                )
            elif extra.get(key) and not results.get(key):
                results[key] = extra[key]
        results["command"] += f"; {extra['command']}"
        results["finished"] = max(results.get("finished", ""), extra.get("finished", ""))
        results["started"] = min(results["started"], extra.get("started", results["started"]))
    if note:
        results["note"] = note
    if not results.get("finished"):  # rendered from a run that was cut short
        results["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        results["elapsed_s"] = (
            datetime.fromisoformat(results["finished"]) - datetime.fromisoformat(results["started"])
        ).total_seconds()
        results["machine"]["load_average_end"] = os.getloadavg()
    return results
