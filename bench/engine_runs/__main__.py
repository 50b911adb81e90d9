"""``python -m bench.engine_runs``: measure (or load a saved run), then save its results and render BENCHMARKS.md."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.engine_runs import CONNECT, SUBMIT
from bench.engine_runs import __doc__ as DOC
from bench.engine_runs.measure import measure
from bench.engine_runs.report import render, summary_figures
from bench.render import publish
from lakehouse.spark import fast_start_java_options


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=DOC.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--idle-runs", type=int, default=1, help="runs with nothing new per repetition"
    )
    parser.add_argument(
        "--scheduled-runs",
        type=int,
        default=2,
        help="small hourly runs through a scheduler per repetition",
    )
    parser.add_argument("--events-per-second", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--engine-port", type=int, help="default: a free port")
    parser.add_argument("--backfill-timeout", type=float, default=2400)
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=(CONNECT, SUBMIT),
        default=[CONNECT, SUBMIT],
        help="measure only these kinds of Spark (a quick look at one; the section compares both)",
    )
    parser.add_argument(
        "--submit-java-options",
        default=fast_start_java_options(),
        help="spark-submit's driver JVM options (SPARK_SUBMIT_OPTS); default: the tests' fast start",
    )
    parser.add_argument("--out", help="render that Markdown file (BENCHMARKS.md) from the results")
    parser.add_argument("--summary", help="update this benchmark's keys in that JSON file")
    parser.add_argument(
        "--from-results", help="render an earlier run's results.json instead of measuring"
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep the runs an interrupted benchmark finished"
    )
    parser.add_argument(
        "--note",
        action="append",
        default=[],
        help="a paragraph about this run for the section (kept in its results.json); repeatable",
    )
    options = parser.parse_args(argv)
    if options.from_results:
        results = json.loads(Path(options.from_results).read_text())
        if options.note:
            results["notes"] = options.note
            Path(options.from_results).write_text(json.dumps(results, indent=1))
    else:
        results = measure(options)
    publish(
        render(results),
        options.out,
        options.summary,
        summary_figures(results),
        benchmark="engine_runs",
        renderer="bench.engine_runs.report",
        results=results,
    )


if __name__ == "__main__":
    main()
