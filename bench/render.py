"""BENCHMARKS.md from the results files in bench/results/: rendering only, no benchmark reruns.

Usage (from the repository; ``make benchmarks-md`` runs it):
    python -m bench.render [--results bench/results] [--out BENCHMARKS.md]

Each benchmark below saved ``bench/results/<name>.json`` when it last ran (:mod:`bench.sections`);
its section is rendered from that file by the benchmark's own ``render``, or is the Markdown it
saved. A benchmark without a results file gets one line saying which command measures it. A
section measured before a table the catalog declares today says, in a line of its own, which
tables it leaves out. The key figures come from ``summary.json``, each with the benchmark that
wrote it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from bench.sections import RESULTS, SUMMARY, declared_tables, save_results

PROJECT_DIR = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Benchmark:
    name: str  # bench/<name>.py (or package) and bench/results/<name>.json
    title: str
    command: str  # what measures it (then `make benchmarks-md` renders it)
    about: str
    renderer: str = ""  # the module whose render(results) draws the section (default bench.<name>)
    per_table: bool = True  # its figures depend on the catalog's tables (a new one is left out)


BENCHMARKS = (
    Benchmark(
        "engine_compare",
        "Per-event cost beside a minimal Spark job, DuckDB and Polars",
        "make bench-compare",
        "the project's pipeline and three minimal jobs over the same landing lines, every catalog "
        "table counted; each contender's tables checked against the project's, the project's "
        "against the oracle",
        "bench.compare.report",
    ),
    Benchmark(
        "engine_runs",
        "The warm engine: DAG runs on Spark Connect vs spark-submit",
        "make bench-engine",
        "Airflow DAG runs (nothing new, a small hour, through a scheduler, a 3-hour backfill) "
        "on the warm engine and by spark-submit",
        "bench.engine_runs.report",
    ),
    Benchmark(
        "sessions_runs",
        "The sessions query on hourly runs",
        "make bench-sessions",
        "the sessions task's cost per hourly run beside silver's, its state and late events",
    ),
    Benchmark(
        "reconcile_late",
        "The sessions' late events reconciled on the engine",
        "make bench-reconcile",
        "one reconcile of 100,000 pending late events: their users' sessions recomputed from "
        "silver and replaced, the settled events marked",
        per_table=False,
    ),
    Benchmark(
        "catch_up",
        "A backlog of days caught up in one run",
        "python -m bench.reconcile_late --catch-up-days 30",
        "a landed backlog of days run through every task once: CPU-s, and the late events the "
        "sessions recorded beside those hour-by-hour runs of the same files would",
    ),
    Benchmark(
        "code_generation",
        "Interpreted or compiled queries: small runs on the warm engine",
        "make bench-codegen",
        "small hourly runs with the jobs' choice of interpreted queries against always compiled",
    ),
    Benchmark(
        "engine_jit",
        "The engine's JIT thresholds",
        "make bench-jit",
        "HotSpot's compile thresholds against ten times them on a fresh engine: its first run, "
        "small hourly runs and an hour of 1M events, every table checked against the oracle",
    ),
    Benchmark(
        "ops_records",
        "A run's ops records: appended by delta-rs, not by Spark",
        "make bench-ops-records",
        "appends of check results to ops.expectation_results by Spark on the engine and by delta-rs",
        per_table=False,
    ),
    Benchmark(
        "landing_history",
        "Bronze's checks against a year of landed files",
        "make bench-history",
        "bronze's Python checks of one hourly run after 36 and 35,040 landed files, the code "
        "before and now, and what bronze's records and the source log grow by per run",
        per_table=False,
    ),
    Benchmark(
        "driver_start",
        "Driver JVM options for short runs",
        "make bench-driver-start",
        "a pipeline pass by spark-submit per set of driver JVM options",
    ),
    Benchmark(
        "storage_compare",
        "The lakehouse on S3 beside local disk",
        "make bench-storage",
        "the whole hourly run (every task) on a local S3-compatible server and on local disk, "
        "demo-sized and one hour of 1M events: CPU-s, wall, S3 requests by kind; every run's tables "
        "checked against the oracle",
    ),
    Benchmark(
        "lineage_overhead",
        "OpenLineage on a run with nothing new",
        "make bench-lineage",
        "hourly DAG runs with nothing new with lineage off, on, and on with the Airflow provider "
        "emitting in a thread; the tables checked against the oracle afterwards",
        per_table=False,
    ),
    Benchmark(
        "ysb_bench",
        "Throughput per layer, incremental vs batch, cost growth, fixed overhead",
        "make bench",
        "the YSB workload per layer and end to end, its batch form, 50 hourly runs, a backfill, "
        "peak memory",
    ),
)

HEADER = """\
# Benchmarks: the YSB lakehouse on one small machine

Rendered by `make benchmarks-md` (`python -m bench.render`) from the results files in
`bench/results/`; do not edit by hand. Rendering reruns nothing: each section names the command
that measured it, and after that command `make benchmarks-md` puts its figures here. Figures are
medians (min–max) over a run's repetitions; CPU seconds are the figure to compare on a shared
machine. Earlier runs and the reasoning around them: docs/benchmark-history.md.
"""


def load(results_dir: Path, name: str) -> dict | None:
    path = results_dir / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def measured_at(saved: dict) -> str:
    results = saved.get("results") or {}
    return str(results.get("measured_at") or saved.get("saved_at") or "?")


def body(benchmark: Benchmark, saved: dict) -> str:
    """The section's Markdown: the benchmark's ``render`` of its results, or the Markdown it saved."""
    if "results" in saved:
        text = importlib.import_module(benchmark.renderer or f"bench.{benchmark.name}").render(
            saved["results"]
        )
    else:
        text = saved.get("section", "")
    lines = [line for line in text.strip("\n").splitlines() if not line.startswith("<!-- ")]
    while lines and not lines[0].strip():
        lines.pop(0)
    # Sections are titled by this list; a benchmark's own heading (once numbered) gives way to it.
    if lines and re.match(r"#+ ", lines[0]):
        lines.pop(0)
    return "\n".join(lines).strip("\n")


def section(benchmark: Benchmark, saved: dict | None, tables: list[str]) -> str:
    out = [f"## {benchmark.title}", "", f"*What:* {benchmark.about}."]
    reproduce = f"*Reproduce:* `{benchmark.command}`, then `make benchmarks-md`."
    if saved is None:
        out += [
            "",
            f"Not measured on today's tables yet (no `bench/results/{benchmark.name}.json`): "
            f"`{benchmark.command}` measures it, then `make benchmarks-md` renders it here. "
            "Earlier figures: docs/benchmark-history.md.",
        ]
        return "\n".join(out)
    left_out = [name for name in tables if name not in saved.get("catalog", tables)]
    left_out = left_out if benchmark.per_table else []
    out += [reproduce, ""]
    if left_out:
        out += [
            f"*Leaves out* {', '.join(f'`{name}`' for name in left_out)}: declared after this run "
            f"({measured_at(saved)[:10]}); `{benchmark.command}` measures "
            + ("them." if len(left_out) > 1 else "it."),
            "",
        ]
    out.append(body(benchmark, saved))
    return "\n".join(out)


def key_figures(results_dir: Path, saved: dict[str, dict]) -> str:
    """summary.json's keys, each with the benchmark that wrote it."""
    path = results_dir / SUMMARY
    summary = json.loads(path.read_text()) if path.exists() else {}
    if not summary:
        return "## Key figures\n\nNo `bench/results/summary.json` yet."
    owner = {key: name for name, data in saved.items() for key in data.get("summary_keys", [])}
    rows = ["| key | value | from |", "| --- | ---: | --- |"]
    for key in sorted(summary, key=lambda k: (owner.get(k, "~"), k)):
        value = summary[key]
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        rows.append(f"| `{key}` | {shown} | {owner.get(key, 'no results file names it')} |")
    return "\n".join(
        [
            "## Key figures",
            "",
            "`bench/results/summary.json`, the flat object of medians each benchmark updates "
            "(its section below says how each was measured).",
            "",
            *rows,
        ]
    )


def render_all(results_dir: Path = RESULTS) -> str:
    tables = declared_tables()
    saved = {b.name: data for b in BENCHMARKS if (data := load(results_dir, b.name)) is not None}
    parts = [HEADER, key_figures(results_dir, saved)]
    parts += [section(b, saved.get(b.name), tables) for b in BENCHMARKS]
    return "\n\n".join(part.strip("\n") for part in parts) + "\n"


def write(out: Path, results_dir: Path = RESULTS) -> None:
    out.write_text(render_all(results_dir))


def publish(
    section: str,
    out: str | None,
    summary: str | None,
    figures: dict,
    *,
    benchmark: str | None = None,
    results: dict | None = None,
) -> None:
    """Print a benchmark's section, keep its results beside ``summary`` and render ``out`` from them.

    The results go to the folder of ``summary`` (default: bench/results when ``out`` is given).
    ``benchmark`` defaults to the script named by the section's opening marker; with ``results``
    the saved file holds them (the benchmark's ``render`` reads them back), else the section itself.
    """
    print(section)
    if benchmark is None:
        first = section.lstrip().splitlines()[0]
        benchmark = Path(first.removeprefix("<!-- ").split(":")[0]).stem
    if summary is None and out is None:
        return
    results_dir = Path(summary).parent if summary else RESULTS
    save_results(
        benchmark,
        results_dir,
        results=results,
        section=None if results is not None else section,
        figures=figures,
    )
    if out:
        write(Path(out), results_dir)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=str(RESULTS), help="the folder of the results files")
    parser.add_argument("--out", default=str(PROJECT_DIR / "BENCHMARKS.md"))
    options = parser.parse_args(argv)
    write(Path(options.out), Path(options.results))
    print(f"BENCHMARKS.md rendered: {options.out}")


if __name__ == "__main__":
    main()
