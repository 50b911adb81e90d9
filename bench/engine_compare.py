"""Per-event cost beside a minimal Spark job, DuckDB and Polars (issue 13): the same outputs, four ways.

Usage (from the repository, after ``make setup``; ``make bench-compare`` runs it):
    python -m bench.engine_compare [--sizes 1M,5M] [--reps 2] [--contenders project,plain_spark,duckdb,polars] \\
        [--check smallest|all|none] [--out BENCHMARKS.md] [--summary bench/results/summary.json]
    python -m bench.engine_compare --from-results .local/bench/compare/results.json --out BENCHMARKS.md  # re-render

Every contender (:mod:`bench.compare`) turns the same landing lines (:func:`bench.ysb.data.dataset_for`:
generated once, cached under ``.local/bench/data``) into the same tables: silver.ad_events,
silver.quarantine_ad_events and the gold tables, as Delta. Each run is a fresh process of its own
(``python -m bench.compare.job``) writing into an empty lakehouse; per size, every repetition runs
every contender, in alternating order (a, b, c, d, then d, c, b, a, ...).

Figures: wall seconds of the process, and CPU seconds (user + system) of its whole process tree:
Python, a driver JVM and whatever they start, start-up and shutdown included. This process is a
child subreaper and waits for each run's every descendant, so ``RUSAGE_CHILDREN`` covers them all.
The project's run also reports CPU and wall per task (its Python process plus its JVM, read around
each task).

Check (``--check``, by default at the smallest size): each contender's tables against the
project's (:mod:`bench.compare.check`: silver's rows, the quarantine's lines per reason, every gold
table's rows as a set), and the project's against the independent oracle
(:mod:`lakehouse_tools.oracle`). A contender that does less than the project is caught there.

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
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.compare import BASELINE, BATCH, CONTENDERS, LABELS, QUARANTINE, spec_for
from bench.sections import markers, publish

PROJECT_DIR = Path(__file__).resolve().parents[1]
WORK = PROJECT_DIR / ".local" / "bench" / "compare"
DATA = PROJECT_DIR / ".local" / "bench" / "data"
BEGIN, END = markers("bench/engine_compare.py")
RUN_TIMEOUT = 3 * 3600
DEFAULT_ARGS = (
    "--sizes 1M,5M --reps 2"  # make bench-compare's (COMPARE_ARGS in include/make/bench.mk)
)


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", flush=True)


# ----------------------------------------------------------------------------------------------
# The code the contenders run


def git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=PROJECT_DIR, capture_output=True, text=True, check=True
    ).stdout.strip()


def code_snapshot(work: Path, mode: str, rev: str = "HEAD") -> tuple[str, Path]:
    """(the code's version, its ``include`` folder): ``rev`` exported, or the work tree's own files."""
    worktree = PROJECT_DIR / "include"
    try:
        commit = git("rev-parse", "--short", rev)
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)", worktree
    if mode == "worktree":
        dirty = git("status", "--porcelain", "--", "include")
        return commit + ("+uncommitted changes in include/" if dirty else ""), worktree
    target = work / "code" / commit
    if not (target / "include").is_dir():
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "archive", commit, "include"], cwd=PROJECT_DIR, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return commit, target / "include"


# ----------------------------------------------------------------------------------------------
# Measuring


def run_contender(
    contender: str, dataset, label: str, rep: int, work: Path, include: Path, timeout: float
) -> dict:
    """One contender's run into a fresh lakehouse over ``dataset`` (size ``label``): its figures and where its tables are."""
    from bench.compare.processes import run_tree
    from bench.ysb.data import fresh_lakehouse

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
    else:
        run["ok"] = False
        run["log_tail"] = log_path.read_text(errors="replace")[-3000:]
    return run


def check_size(runs: list[dict], dataset, with_oracle: bool) -> dict:
    """Each contender's last run at this size against the project's; the project's against the oracle."""
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
        compared = {
            name: path
            for name, path in reference.items()
            if not (contender == BATCH and name == QUARANTINE)
        }
        tables = compare_tables(compared, spec_for(run["root"], contender, "")["tables"])
        result["contenders"][contender] = {
            "ok": all(t["ok"] for t in tables.values()),
            "tables": tables,
        }
    return result


def measure(options, out_results: Path) -> dict:
    from bench.compare.processes import become_subreaper
    from bench.ysb.data import dataset_for
    from bench.ysb.measuring import machine_info, parse_size, size_label

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
    commit, include = code_snapshot(work, options.code)
    includes = dict.fromkeys(contenders, include)
    baseline = None
    if options.baseline:
        baseline, includes[BASELINE] = code_snapshot(work, "head", options.baseline)
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
            order = contenders if rep % 2 == 0 else contenders[::-1]
            for contender in order:
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


def engine_versions() -> dict:
    from importlib.metadata import version

    return {
        name: version(name) for name in ("pyspark", "delta-spark", "duckdb", "polars", "deltalake")
    }


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


def make_command(command: str) -> str:
    """The make line that runs ``command`` (the default arguments are include/make/bench.mk's COMPARE_ARGS)."""
    args = command.removeprefix("python -m bench.engine_compare").strip()
    return (
        "`make bench-compare`"
        if args == DEFAULT_ARGS
        else f"`make bench-compare COMPARE_ARGS='{args}'`"
    )


def check_summary(checked: dict) -> str:
    if "error" in checked:
        return checked["error"]
    parts = []
    if "oracle" in checked:
        parts.append("project vs oracle " + ("passed" if checked["oracle"]["ok"] else "FAILED"))
    for contender, outcome in checked["contenders"].items():
        if outcome["ok"]:
            parts.append(f"{contender} passed")
        else:
            problems = [t["detail"] for t in outcome["tables"].values() if not t["ok"]] or [
                outcome.get("detail", "")
            ]
            parts.append(f"{contender} FAILED ({'; '.join(problems)})")
    return ", ".join(parts)


# ----------------------------------------------------------------------------------------------
# Figures and the report


def samples(results: dict, size: str, contender: str, measure: str = "cpu") -> list[float]:
    return [
        r[measure]
        for r in results["runs"]
        if r["size"] == size and r["contender"] == contender and r["ok"]
    ]


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def cell(values: list[float], digits: int = 1) -> str:
    if not values:
        return "–"
    text = f"{median(values):.{digits}f}"
    return (
        text if len(values) == 1 else f"{text} ({min(values):.{digits}f}–{max(values):.{digits}f})"
    )


def cpu_ratio(results: dict, size: str, contender: str) -> float | None:
    """Project CPU ÷ the contender's (medians): how many times the project's cost per event is the contender's."""
    project, other = (
        median(samples(results, size, "project")),
        median(samples(results, size, contender)),
    )
    return project / other if project and other else None


def size_labels(results: dict) -> list[str]:
    return list(results["datasets"])


def check_cell(results: dict, size: str, contender: str) -> str:
    checked = results.get("checks", {}).get(size)
    if not checked:
        return "not checked"
    if "error" in checked:
        return "not checked (no project tables)"
    if contender == "project":
        oracle = checked.get("oracle")
        return "–" if oracle is None else ("= oracle" if oracle["ok"] else "**≠ oracle**")
    outcome = checked["contenders"].get(contender)
    if outcome is None:
        return "not checked"
    return "= project" if outcome["ok"] else "**FAILED**"


def project_layers(
    results: dict, size: str, contender: str = "project"
) -> list[tuple[str, str, list[float], list[float]]]:
    """(row label, layer, CPU samples, wall samples) of the project's runs at ``size``: start-up, each task, stop, the rest."""
    runs = [
        r
        for r in results["runs"]
        if r["size"] == size and r["contender"] == contender and r["ok"] and "job" in r
    ]
    if not runs:
        return []
    rows = [
        (
            "process start, imports, JVM, session",
            "",
            [r["job"]["setup"]["cpu"] for r in runs],
            [r["job"]["setup"]["wall"] for r in runs],
        )
    ]
    for task, figures in runs[0]["job"]["tasks"].items():
        rows.append(
            (
                f"`{task}`",
                figures["layer"],
                [r["job"]["tasks"][task]["cpu"] for r in runs],
                [r["job"]["tasks"][task]["wall"] for r in runs],
            )
        )
    rest_cpu = [
        r["cpu"] - r["job"]["setup"]["cpu"] - sum(t["cpu"] for t in r["job"]["tasks"].values())
        for r in runs
    ]
    rest_wall = [
        r["wall"] - r["job"]["setup"]["wall"] - sum(t["wall"] for t in r["job"]["tasks"].values())
        for r in runs
    ]
    rows.append(("spark.stop(), JVM and process exit", "", rest_cpu, rest_wall))
    return rows


def layer_totals(results: dict, size: str) -> dict[str, float]:
    """Median CPU seconds per layer of the project's tasks at ``size``."""
    totals: dict[str, list[float]] = {}
    runs = [
        r
        for r in results["runs"]
        if r["size"] == size and r["contender"] == "project" and r["ok"] and "job" in r
    ]
    for run in runs:
        per_layer: dict[str, float] = {}
        for figures in run["job"]["tasks"].values():
            per_layer[figures["layer"]] = per_layer.get(figures["layer"], 0.0) + figures["cpu"]
        for layer, cpu in per_layer.items():
            totals.setdefault(layer, []).append(cpu)
    return {layer: median(values) for layer, values in totals.items()}


def render(results: dict) -> str:
    load, end_load = results["load_at_start"], results.get("load_at_end")
    versions = results["versions"]
    machine = results["machine"]
    reps = results["reps"]
    out = [
        BEGIN,
        "## 12. Per-event cost beside a minimal Spark job, DuckDB and Polars (issue 13)",
        "",
        f"* **Command:** {make_command(results['command'])}, i.e. "
        f"`{results['command']} --out BENCHMARKS.md --summary bench/results/summary.json`",
        f"* **Date:** {results['measured_at']}"
        + (f" → {results['finished_at']}" if results.get("finished_at") else " (did not finish)")
        + f"; load average at the start {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}"
        + (
            f" (at the end {end_load[0]:.1f}, {end_load[1]:.1f}, {end_load[2]:.1f})"
            if end_load
            else ""
        )
        + f"; {machine['nproc']} cores, {machine['memory']}, {machine['cpu']}",
        f"* **Code:** the project at {results['commit']}"
        + (
            " (that commit's `include/`, exported when the run started: later edits are in no figure)"
            if results["code"] == "head"
            else " (the work tree's files)"
        )
        + f"; PySpark {versions['pyspark']}, Delta Lake {versions['delta-spark']}, DuckDB {versions['duckdb']}, "
        f"Polars {versions['polars']}, deltalake (delta-rs) {versions['deltalake']}.",
        "* **Work:** the same landing lines (the project's generator: ≈1% duplicates, 0.5% malformed lines, 1% late "
        "events) into the same tables, as Delta: `silver.ad_events`, `silver.quarantine_ad_events`, "
        "`gold.campaign_windows`, `gold.campaign_hourly`, `gold.ad_type_hourly`, partitioned as the catalog declares. "
        f"{reps} repetition(s) per size, each contender in a fresh process and an empty lakehouse, the contenders in "
        "alternating order (a, b, c, d, then d, c, b, a). **project** = the DAG's tasks of these tables and of "
        "everything upstream of them, in order (`lakehouse.runner.run(task, ['--lakehouse-root', root])`, "
        "incremental availableNow runs: also bronze, the dimension and the silver metrics record; not the sessions) "
        "on a driver in the process (`LAKEHOUSE_ENGINE=local`); "
        "**project, batch form** = the same tasks, silver and gold in their batch form (`--mode batch` over every "
        "event hour of the data, as a backfill runs them; its ratio is the incremental-to-batch ratio), checked "
        "against the project's tables but the quarantine, which the batch form does not write; "
        "**plain Spark** = one hand-written batch job (`spark.read.text`, one `from_json` with an explicit schema, the "
        "quarantine reasons below, a broadcast join with campaigns.csv, `dropDuplicates(event_id)`, the gold aggregates "
        "over silver read back; plain overwrites); every Spark contender gets the same session: "
        "`lakehouse.spark.build_spark_session(engine_kind='local')`, i.e. `DEFAULT_CONF` (Delta, UTC, 4 shuffle "
        "partitions, the driver JVM options `LONG_RUN_JAVA_OPTIONS` of `lakehouse/spark.py` at that commit), `local[2]`, `spark.driver.memory` 2g, no UI. "
        "**DuckDB** = SQL, "
        "**Polars** = lazy frames, each writing Arrow to Delta with `deltalake` (plain overwrite), both on their "
        "default of one thread per core.",
        "* **CPU** = user + system seconds of the contender's whole process tree (Python, the driver JVM, their "
        "children), from process start to exit: imports, JVM start-up and shutdown included. Median (min–max) over "
        "the repetitions; events per CPU-s = landing lines ÷ CPU seconds; the ratio is the project's median CPU ÷ "
        "the contender's.",
        "* **Check:** " + check_sentence(results),
        "",
    ]
    for size in size_labels(results):
        data = results["datasets"][size]
        out += [
            f"**{size} events** ({data['lines']:,} landing lines, {data['hours']} producer hour(s)):",
            "",
            "| contender | CPU s | wall s | events per CPU-s | project CPU ÷ its CPU | tables |",
            "| --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for contender in results["contenders"]:
            cpu = samples(results, size, contender)
            eps = f"{data['lines'] / median(cpu):,.0f}" if cpu else "–"
            ratio = cpu_ratio(results, size, contender)
            failed = sum(
                1
                for r in results["runs"]
                if r["size"] == size and r["contender"] == contender and not r["ok"]
            )
            out.append(
                f"| {label_of(results, contender)} | {cell(cpu)} | {cell(samples(results, size, contender, 'wall'))} | {eps} | "
                + (f"{ratio:.2f}×" if ratio else "–")
                + f" | {check_cell(results, size, contender)}"
                + (f"; {failed} run(s) failed" if failed else "")
                + " |"
            )
        out.append("")
    if "project" in results["contenders"]:
        out += project_section(results)
    if results.get("baseline"):
        out += ["", *steps_side_by_side(results, BASELINE)]
    if BATCH in results["contenders"]:
        out += ["", *steps_side_by_side(results, BATCH)]
    out += ["", interpretation(results), "", LEFT_OUT]
    failures = check_failures(results)
    if failures:
        out += ["", "Check failures:", ""] + [f"* {f}" for f in failures]
    out += [f"\n{note}" for note in results.get("notes", [])]
    out.append(END)
    return "\n".join(out) + "\n"


LEFT_OUT = (
    "What the minimal jobs leave out (the project does all of it): they implement only the quarantine reasons "
    "the generated data holds (`malformed_json`, `missing_required_field`, `unknown_ad_id`, plus "
    "`invalid_event_time` for a non-numeric time), not invalid UTF-8, over-long or blank lines, wrong JSON types, "
    "duplicate keys, future event times, unknown event or ad types; no `rescued_data`, `reason_detail` or `raw_bytes` "
    "columns; no bronze table, no dimension table, no metrics record; no streaming checkpoints, exactly-once "
    "transaction ids, dedup against earlier runs (insert-only MERGE), or replacement of only the touched hours: "
    "each overwrites its tables from all the lines. Polars quarantines as malformed only lines not shaped "
    "`{…}` (it has no lenient JSON decode: a line shaped like an object but invalid inside would fail its job)."
)


def check_sentence(results: dict) -> str:
    checked = results.get("checks", {})
    if not checked:
        return "none in this run (`--check none`)."
    return (
        "at "
        + ", ".join(checked)
        + ", each contender's tables against the project's (silver: the same rows per "
        "`event_id`, contract fields, campaign, event date and hour; the quarantine: the same lines per reason; "
        "every gold table: the same rows as a set, `ctr` within 1e-9), and the project's against the oracle "
        "(`lakehouse_tools.oracle`, plain Python over the raw lines); "
        + (
            "every check passed."
            if not check_failures(results)
            else "**some checks failed** (below)."
        )
    )


def check_failures(results: dict) -> list[str]:
    found = []
    for size, checked in results.get("checks", {}).items():
        if "error" in checked:
            found.append(f"{size}: {checked['error']}")
            continue
        oracle = checked.get("oracle")
        if oracle and not oracle["ok"]:
            found += [
                f"{size}, project vs oracle: {t['detail']}"
                for t in oracle["tables"].values()
                if not t["ok"]
            ]
        for contender, outcome in checked["contenders"].items():
            if not outcome["ok"]:
                details = [t["detail"] for t in outcome["tables"].values() if not t["ok"]] or [
                    outcome.get("detail", "")
                ]
                found += [f"{size}, {contender}: {d}" for d in details]
    return found


def project_section(results: dict) -> list[str]:
    sizes = [s for s in size_labels(results) if project_layers(results, s)]
    if not sizes:
        return []
    header = (
        "| the project's run | layer | "
        + " | ".join(f"{s} CPU s | {s} wall s" for s in sizes)
        + " |"
    )
    out = [
        "The project's run, step by step (CPU = its Python process + its driver JVM, read before and after each task; "
        "median (min–max)):",
        "",
        header,
        "| --- | --- |" + " ---: | ---: |" * len(sizes),
    ]
    by_size = {s: project_layers(results, s) for s in sizes}
    for index, (label, layer, _, _) in enumerate(by_size[sizes[0]]):
        cells = []
        for s in sizes:
            _, _, cpu, wall = by_size[s][index]
            cells.append(f"{cell(cpu)} | {cell(wall)}")
        out.append(f"| {label} | {layer} | " + " | ".join(cells) + " |")
    whole = [
        f"{cell(samples(results, s, 'project'))} | {cell(samples(results, s, 'project', 'wall'))}"
        for s in sizes
    ]
    out.append("| **whole process tree** | | " + " | ".join(whole) + " |")
    out.append("")
    for s in sizes:
        totals = layer_totals(results, s)
        total = median(samples(results, s, "project"))
        if totals and total:
            out.append(
                f"By layer at {s}: "
                + ", ".join(
                    f"{layer} {cpu:.1f} CPU-s ({cpu / total:.0%})" for layer, cpu in totals.items()
                )
                + f" of {total:.1f}."
            )
    return out


def interpretation(results: dict) -> str:
    parts = []
    for size in size_labels(results):
        ratios = {
            c: cpu_ratio(results, size, c)
            for c in results["contenders"]
            if c not in ("project", BASELINE)
        }
        known = {c: r for c, r in ratios.items() if r}
        if not known:
            continue
        parts.append(
            f"At {size} events the project spends "
            + ", ".join(f"{r:.1f}× the CPU of {LABELS[c].split(' (')[0]}" for c, r in known.items())
            + "."
        )
    if not parts:
        return "Too few successful runs to compare."
    parts.append(
        "The project's figure is the whole DAG (bronze and the dimension too) with its guarantees; the minimal jobs "
        "read the landing lines once and skip bronze, which is part of what they save (its task's row above)."
    )
    return " ".join(parts)


def label_of(results: dict, contender: str) -> str:
    if contender == BASELINE:
        return f"project at {results.get('baseline')} (baseline)"
    return LABELS[contender]


def steps_side_by_side(results: dict, other: str) -> list[str]:
    """The project's steps beside another run of the project's tasks, ``other``: the baseline commit
    (``--baseline``: the change's before and after) or the batch form (where incremental costs more)."""
    sizes = [
        s
        for s in size_labels(results)
        if project_layers(results, s, other) and project_layers(results, s)
    ]
    if not sizes:
        return []
    if other == BASELINE:
        title = f"The change since {results['baseline']}, step by step"
        columns = [f"{s} at {results['baseline']} | {s} at {results['commit']}" for s in sizes]
    else:
        title = (
            "The incremental run beside the batch form (a backfill of the same hours), step by step"
        )
        columns = [f"{s} batch | {s} incremental | {s} ratio" for s in sizes]
    out = [
        f"{title} (CPU s, median (min–max); the same run, alternating):",
        "",
        "| step | layer | " + " | ".join(columns) + " |",
        "| --- | --- |"
        + (" ---: | ---: |" if other == BASELINE else " ---: | ---: | ---: |") * len(sizes),
    ]
    before = {s: project_layers(results, s, other) for s in sizes}
    after = {s: project_layers(results, s) for s in sizes}

    def cells(then: list[float], now: list[float]) -> str:
        if other == BASELINE:
            return f"{cell(then)} | {cell(now)}"
        ratio = median(now) / median(then) if median(then) and median(then) > 0 else None
        return f"{cell(then)} | {cell(now)} | " + (f"{ratio:.2f}×" if ratio else "–")

    for index, (label, layer, _, _) in enumerate(after[sizes[0]]):
        out.append(
            f"| {label} | {layer} | "
            + " | ".join(cells(before[s][index][2], after[s][index][2]) for s in sizes)
            + " |"
        )
    out.append(
        "| **whole process tree** | | "
        + " | ".join(
            cells(samples(results, s, other), samples(results, s, "project")) for s in sizes
        )
        + " |"
    )
    return [*out, ""]


def summary_figures(results: dict) -> dict:
    """The medians bench/results/summary.json holds for this benchmark."""
    out: dict = {"events": results["sizes"]}
    for size in size_labels(results):
        suffix = size.lower().replace(".", "_")
        for contender in ("plain_spark", "polars", "duckdb"):
            ratio = cpu_ratio(results, size, contender)
            if ratio:
                out[f"cpu_ratio_project_to_{contender}_{suffix}"] = round(ratio, 2)
        cpu = median(samples(results, size, "project"))
        if cpu:
            out[f"events_per_cpu_s_{suffix}"] = round(results["datasets"][size]["lines"] / cpu)
        ratio = cpu_ratio(results, size, BATCH)
        if ratio:
            out[f"incremental_to_batch_ratio_{suffix}"] = out["incremental_to_batch_ratio"] = round(
                ratio, 2
            )  # the largest size last
    return out


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
    parser.add_argument("--out", help="replace this benchmark's section in that Markdown file")
    parser.add_argument("--summary", help="update this benchmark's keys in that JSON file")
    parser.add_argument(
        "--from-results", help="render an earlier run's results.json instead of measuring"
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
    publish(render(results), options.out, options.summary, summary_figures(results))


if __name__ == "__main__":
    main()
