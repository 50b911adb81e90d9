"""YSB lakehouse benchmark: throughput per layer, incremental vs batch, cost growth, fixed overhead.

Usage (from the repository, after ``make setup``; ``make bench`` / ``make bench-smoke`` run these):
    python -m bench.ysb_bench [--sizes 1M,4M] [--masters 'local[1],local[2]'] [--reps 3] \
        [--growth-runs 50] [--growth-eps 0.2] [--backfill-eps 12] [--out BENCHMARKS.md]
    python -m bench.ysb_bench --smoke            # tiny sizes, 1 repetition, report to .local/bench-smoke
    python -m bench.ysb_bench --report-only [--work-dir DIR] [--merge DIR2,...]   # render saved results

Data comes from the project's generator (:func:`lakehouse_tools.generator.write_hours`) into
``.local/bench/data`` (kept between runs: an hour already there is not generated again). Every
measurement that needs a Spark session runs in a worker subprocess (:mod:`bench.ysb.worker`) with
its own JVM and master, so JVM start-up is never inside a throughput figure; the worker runs the
catalog's tasks in-process through ``lakehouse.runner`` and times each one. The parts live in
:mod:`bench.ysb`; this module is the command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.ysb import worker
from bench.ysb.benchmark import STAGES, run_benchmark, saved_results
from bench.ysb.overhead import PROJECT_DIR
from bench.ysb.report import write_report

DEFAULT_WORK_DIR = PROJECT_DIR / ".local" / "bench"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--worker", choices=worker.WORKERS, help=argparse.SUPPRESS
    )  # as python -m bench.ysb.worker
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, 1 repetition, report under .local/bench-smoke",
    )
    parser.add_argument(
        "--sizes", default="1M,4M", help="events per throughput dataset, e.g. 2M,10M"
    )
    parser.add_argument("--masters", default="local[1],local[2]")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--growth-runs", type=int, default=50)
    parser.add_argument(
        "--growth-eps", type=float, default=0.2, help="events/s of each hourly run's new hour"
    )
    parser.add_argument(
        "--backfill-eps", type=float, default=12.0, help="events/s of the 24-hour backfill data"
    )
    parser.add_argument(
        "--variants",
        default="baseline;shuffle2:spark.sql.shuffle.partitions=2",
        help="tuning variants 'name:key=value,...;name2:...'; the first is the baseline (none: skip tuning)",
    )
    parser.add_argument("--tune-growth-runs", type=int, default=4)
    parser.add_argument(
        "--tune-parallel",
        action="store_true",
        help="run a round's variants at the same time (each its own JVM)",
    )
    parser.add_argument("--skip-airflow", action="store_true", help="leave out the DAG run of §4")
    parser.add_argument(
        "--warmup",
        action="store_true",
        help="one untimed pipeline run on tiny data per worker JVM before the timed ones",
    )
    parser.add_argument(
        "--stages", default=",".join(STAGES), help=f"a subset of {','.join(STAGES)}"
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep the work dir's earlier results; run --stages"
    )
    parser.add_argument(
        "--merge", default="", help="with --report-only: other work dirs whose stages to add"
    )
    parser.add_argument(
        "--note", default="", help="with --report-only: a note for the report's header"
    )
    parser.add_argument(
        "--report-only", action="store_true", help="render --out from the work dir's results.json"
    )
    parser.add_argument("--work-dir", default=str(DEFAULT_WORK_DIR))
    parser.add_argument("--out", default=str(PROJECT_DIR / "BENCHMARKS.md"))
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.reps, args.growth_runs, args.backfill_eps = "5k,10k", 1, 4, 0.05
        args.tune_growth_runs, args.variants = 2, "baseline;shuffle2:spark.sql.shuffle.partitions=2"
        args.work_dir = str(PROJECT_DIR / ".local" / "bench-smoke")
        args.out = str(Path(args.work_dir) / "BENCHMARKS.md")
    args.work_dir = str(Path(args.work_dir).absolute())
    args.command = "python -m bench.ysb_bench " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker.main(args.worker, args.spec)
        return
    Path(args.work_dir).mkdir(parents=True, exist_ok=True)
    if args.report_only:
        results = saved_results(args.work_dir, list(filter(None, args.merge.split(","))), args.note)
    else:
        results = run_benchmark(args, log=lambda message: print(message, flush=True))
    write_report(results, Path(args.out))
    print(f"Report: {args.out}")


if __name__ == "__main__":
    main()
