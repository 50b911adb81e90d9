"""The engine comparison's section of BENCHMARKS.md and its keys of summary.json, from a run's results.

Every table the catalog declared when the run measured (``results["catalog"]``) has a row in the
per-table check, with each contender's verdict (:mod:`bench.compare.check`): equal to the
reference, differs, not implemented, not run, or written but not compared. The project's run is
also shown step by step: each task's CPU, beside the batch form's.
"""

from __future__ import annotations

from collections import Counter

from bench.compare import BATCH, LABELS, OPEN_SESSIONS, USER_SESSIONS
from bench.harness import cell, median


def runs_of(results: dict, size: str, contender: str) -> list[dict]:
    """The contender's runs at ``size`` that succeeded."""
    return [
        r
        for r in results["runs"]
        if (r["size"], r["contender"], r["ok"]) == (size, contender, True)
    ]


def jobs(results: dict, size: str, contender: str) -> list[dict]:
    """What each of the contender's runs at ``size`` reported of itself (its steps or tasks)."""
    return [r["job"] for r in runs_of(results, size, contender) if "job" in r]


def samples(results: dict, size: str, contender: str, measure: str = "cpu") -> list[float]:
    return [r[measure] for r in runs_of(results, size, contender)]


def cpu_ratio(results: dict, size: str, contender: str) -> float | None:
    """Project CPU ÷ the contender's (medians): how many times the project's cost per event is the contender's."""
    project, other = (
        median(samples(results, size, "project")),
        median(samples(results, size, contender)),
    )
    return project / other if project and other else None


def size_labels(results: dict) -> list[str]:
    return list(results["datasets"])


def sessions_cpu(results: dict, size: str, contender: str) -> list[float]:
    """CPU seconds of a contender's sessions: the project's sessions task; a minimal job's steps
    from silver to both sessions tables written."""
    task = results.get("sessions_task")
    if contender in ("project", BATCH):
        tasks = [job.get("tasks", {}) for job in jobs(results, size, contender)]
        return [t[task]["cpu"] for t in tasks if task in t]
    out = []
    for job in jobs(results, size, contender):
        steps = job.get("steps", {})
        parts = [steps.get(name) for name in ("sessions", USER_SESSIONS, OPEN_SESSIONS)]
        cpus = [part.get("cpu") for part in parts if isinstance(part, dict)]
        if cpus and None not in cpus:
            out.append(sum(cpus))
    return out


def project_layers(
    results: dict, size: str, contender: str = "project"
) -> list[tuple[str, str, list[float], list[float]]]:
    """(row label, layer, CPU samples, wall samples) of the project's runs at ``size``: start-up, each task, stop, the rest."""
    runs = [r for r in runs_of(results, size, contender) if "job" in r]
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
    for job in jobs(results, size, "project"):
        per_layer: dict[str, float] = {}
        for figures in job["tasks"].values():
            per_layer[figures["layer"]] = per_layer.get(figures["layer"], 0.0) + figures["cpu"]
        for layer, cpu in per_layer.items():
            totals.setdefault(layer, []).append(cpu)
    return {layer: median(values) for layer, values in totals.items()}


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


def beside_batch(results: dict) -> list[str]:
    """The project's steps beside its batch form's: where the incremental run costs more."""
    sizes = [
        s
        for s in size_labels(results)
        if project_layers(results, s, BATCH) and project_layers(results, s)
    ]
    if not sizes:
        return []
    out = [
        "The incremental run beside the batch form (a backfill of the same hours), step by step "
        "(CPU s, median (min–max); the same run, alternating):",
        "",
        "| step | layer | "
        + " | ".join(f"{s} batch | {s} incremental | {s} ratio" for s in sizes)
        + " |",
        "| --- | --- |" + " ---: | ---: | ---: |" * len(sizes),
    ]
    before = {s: project_layers(results, s, BATCH) for s in sizes}
    after = {s: project_layers(results, s) for s in sizes}

    def cells(then: list[float], now: list[float]) -> str:
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
            cells(samples(results, s, BATCH), samples(results, s, "project")) for s in sizes
        )
        + " |"
    )
    return [*out, ""]


def short_label(contender: str) -> str:
    return LABELS[contender].split(" (")[0]


# make bench-compare's (COMPARE_ARGS in include/make/bench.mk)
DEFAULT_ARGS = "--sizes 1M,5M --reps 2"


def make_command(command: str) -> str:
    """The make line that runs ``command`` (the default arguments are include/make/bench.mk's COMPARE_ARGS)."""
    args = command.removeprefix("python -m bench.engine_compare").strip()
    return (
        "`make bench-compare`"
        if args == DEFAULT_ARGS
        else f"`make bench-compare COMPARE_ARGS='{args}'`"
    )


CELL = {
    "differs": "**differs**",
    "not written": "**not written**",
    "not implemented": "not implemented",
    "not run": "not run",
    "unchecked": "written, not compared",
}


def tables_of(results: dict) -> list[str]:
    """The tables the run counted: every table the catalog declared when it ran."""
    return list(results["catalog"])


def verdicts(results: dict, size: str, contender: str) -> dict[str, dict] | None:
    """Each table's verdict for ``contender`` at ``size`` (the project's: against the oracle)."""
    checked = results.get("checks", {}).get(size)
    if not checked or "error" in checked:
        return None
    if contender == "project":
        oracle = checked.get("oracle")
        return oracle["tables"] if oracle else None
    outcome = checked["contenders"].get(contender)
    return (outcome or {}).get("tables") or None


def table_cell(results: dict, size: str, contender: str, table: str) -> str:
    found = (verdicts(results, size, contender) or {}).get(table)
    if found is None:
        return "–"
    if found["status"] == "equal":
        return "= oracle" if contender == "project" else "= project"
    if found["status"] == "not run" and found["detail"].startswith("written by"):
        return f"not run ({found['detail']})"
    return CELL[found["status"]]


def check_cell(results: dict, size: str, contender: str) -> str:
    """A contender's tables in one cell: how many equal the reference, how many it does not implement."""
    checked = results.get("checks", {}).get(size)
    if not checked:
        return "not checked"
    if "error" in checked:
        return "not checked (no project tables)"
    found = verdicts(results, size, contender)
    if found is None:
        outcome = checked["contenders"].get(contender)
        return "**its run failed**" if outcome and not outcome["ok"] else "not checked"
    counts = Counter(v["status"] for v in found.values())
    reference = "oracle" if contender == "project" else "project"
    parts = [f"{counts['equal']} of {len(found)} = {reference}"]
    for status, label in (
        ("not implemented", "not implemented"),
        ("unchecked", "not compared"),
        ("not run", "not run"),
    ):
        if counts[status]:
            parts.append(f"{counts[status]} {label}")
    if counts["differs"] + counts["not written"]:
        parts.append(f"**{counts['differs'] + counts['not written']} differ**")
    return ", ".join(parts)


def table_matrix(results: dict, size: str) -> list[str]:
    """Every declared table, one row each, with every contender's verdict at ``size``."""
    contenders = [c for c in results["contenders"] if verdicts(results, size, c) is not None]
    if not contenders:
        return []
    return [
        f"**Every table the catalog declares, at {size}** (`=`: equal to the oracle for the "
        "project, to the project for the others; *not implemented*: the contender has no code for "
        "it; *not run*: no task of the DAG writes it; *written, not compared*: run records whose "
        "times and ids differ from run to run):",
        "",
        "| table | " + " | ".join(short_label(c) for c in contenders) + " |",
        "| --- |" + " --- |" * len(contenders),
        *(
            f"| `{table}` | "
            + " | ".join(table_cell(results, size, c, table) for c in contenders)
            + " |"
            for table in tables_of(results)
        ),
        "",
    ]


def sessions_line(results: dict, size: str) -> str:
    project = median(sessions_cpu(results, size, "project"))
    if not project:
        return ""
    others = [
        (c, median(sessions_cpu(results, size, c))) for c in results["contenders"] if c != "project"
    ]
    return (
        f"**Sessions at {size}:** the project's `{results.get('sessions_task')}` task "
        f"{project:.1f} CPU-s; "
        + ", ".join(
            f"{short_label(c)} {cpu:.1f} CPU-s (the project's {project / cpu:.1f}×)"
            for c, cpu in others
            if cpu
        )
        + ". A minimal job's sessions are its steps from silver to both sessions tables written "
        "(plain Spark: `session_window`; Polars: window functions over each user's "
        "events); the project's task also records late events, its state and its progress."
    )


def render(results: dict) -> str:
    load, end_load = results["load_at_start"], results.get("load_at_end")
    versions = results["versions"]
    machine = results["machine"]
    reps = results["reps"]
    tables = tables_of(results)
    out = [
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
        + f"; PySpark {versions['pyspark']}, Delta Lake {versions['delta-spark']}, "
        + f"Polars {versions['polars']}, deltalake (delta-rs) {versions['deltalake']}.",
        "* **Work:** the same landing lines (the project's generator: ≈1% duplicates, 0.5% malformed lines, 1% late "
        f"events) into every table the catalog declares ({len(tables)}), as Delta, partitioned as the catalog "
        f"declares. {reps} repetition(s) per size, each contender in a fresh process and an empty lakehouse, the "
        "contenders in alternating order (a, b, c, d, then d, c, b, a). **project** = every task of the DAG in "
        "order (`lakehouse.runner.run(task, ['--lakehouse-root', root])`, incremental availableNow runs: the "
        "dimension, bronze, silver with its quarantine and metrics record, every gold table, the sessions, their "
        "progress and check records) on a driver in the process (`LAKEHOUSE_ENGINE=local`); "
        "**project, batch form** = the same tasks, silver, gold and the sessions in their batch form (`--mode batch` "
        "over every event hour of the data, as a backfill runs them; its ratio is the incremental-to-batch ratio); "
        "**plain Spark** = one hand-written batch job (campaigns.csv and `spark.read.text` written as the dimension "
        "and bronze; from bronze, one `from_json` with an explicit schema, the quarantine reasons below, a broadcast "
        "join with the campaigns, `dropDuplicates(event_id)`; the gold aggregates over silver read back; the sessions "
        "with Spark's native `session_window`, 30-minute gap; plain overwrites); every Spark contender gets the same "
        "session: `lakehouse.spark.build_spark_session(engine_kind='local')`, i.e. `DEFAULT_CONF` (Delta, UTC, 4 "
        "shuffle partitions, the driver JVM options `LONG_RUN_JAVA_OPTIONS` of `lakehouse/spark.py` at that commit), "
        "`local[2]`, `spark.driver.memory` 2g, no UI. "
        "**Polars** = lazy frames, sessions with window functions, writing Arrow to Delta with "
        "`deltalake` (plain overwrite), on its default of one thread per core. "
        "The minimal jobs write no ops records: those rows say *not implemented*.",
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
                f"| {LABELS[contender]} | {cell(cpu)} | {cell(samples(results, size, contender, 'wall'))} | {eps} | "
                + (f"{ratio:.2f}×" if ratio else "–")
                + f" | {check_cell(results, size, contender)}"
                + (f"; {failed} run(s) failed" if failed else "")
                + " |"
            )
        out.append("")
        out += table_matrix(results, size)
        if line := sessions_line(results, size):
            out += [line, ""]
    if "project" in results["contenders"]:
        out += project_section(results)
    if BATCH in results["contenders"]:
        out += ["", *beside_batch(results)]
    out += ["", interpretation(results), "", LEFT_OUT]
    failures = check_failures(results)
    if failures:
        out += ["", "Check failures:", ""] + [f"* {f}" for f in failures]
    out += [f"\n{note}" for note in results.get("notes", [])]
    return "\n".join(out) + "\n"


LEFT_OUT = (
    "What the minimal jobs leave out (the project does all of it): they implement only the quarantine reasons "
    "the generated data holds (`malformed_json`, `missing_required_field`, `unknown_ad_id`, plus "
    "`invalid_event_time` for a non-numeric time), not invalid UTF-8, over-long or blank lines, wrong JSON types, "
    "duplicate keys, future event times, unknown event or ad types; no `rescued_data`, `reason_detail` or `raw_bytes` "
    "columns; no ops records (the silver metrics, query progress, expectation results, late session events); no "
    "streaming checkpoints, exactly-once transaction ids, dedup against earlier runs (insert-only MERGE), "
    "replacement of only the touched hours, or session state across runs (one batch over every line: no event "
    "is late): each overwrites its tables from all the lines. Polars quarantines as malformed only lines not shaped "
    "`{…}` (it has no lenient JSON decode: a line shaped like an object but invalid inside would fail its job)."
)


def check_sentence(results: dict) -> str:
    checked = results.get("checks", {})
    if not checked:
        return "none in this run (`--check none`)."
    return (
        "at "
        + ", ".join(checked)
        + ", every table of each contender against the project's (silver: the same rows per "
        "`event_id`, contract fields, campaign, event date and hour; the quarantine: the same lines per reason; "
        "bronze: the same lines; every other table, the sessions included: the same rows as a set, floating-point "
        "columns within 1e-9), and the project's against the oracle (`lakehouse_tools.oracle`, plain Python over "
        "the raw lines: silver, quarantine, bronze's line count, the dimension, every gold table); "
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


def interpretation(results: dict) -> str:
    parts = []
    for size in size_labels(results):
        ratios = {c: cpu_ratio(results, size, c) for c in results["contenders"] if c != "project"}
        known = {c: r for c, r in ratios.items() if r}
        if not known:
            continue
        parts.append(
            f"At {size} events the project spends "
            + ", ".join(f"{r:.1f}× the CPU of {short_label(c)}" for c, r in known.items())
            + "."
        )
    if not parts:
        return "Too few successful runs to compare."
    parts.append(
        "The project's figure is the whole DAG with its guarantees; the minimal jobs write the same tables but the "
        "ops records, from all the lines at once."
    )
    return " ".join(parts)


def summary_figures(results: dict) -> dict:
    """The medians (and table counts) bench/results/summary.json holds for this benchmark."""
    sizes = size_labels(results)
    out: dict = {"events": results["sizes"], "tables_counted": len(tables_of(results))}
    for contender in results["contenders"]:
        if contender == "project":
            continue
        missing = {
            table
            for size in sizes
            for table, v in (verdicts(results, size, contender) or {}).items()
            if v["status"] == "not implemented"
        }
        if any(verdicts(results, size, contender) for size in sizes):
            out[f"tables_not_implemented_{contender}"] = sorted(missing)
    for size in sizes:
        suffix = size.lower().replace(".", "_")
        for contender in ("plain_spark", "polars"):
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
        sessions = median(sessions_cpu(results, size, "project"))
        native = median(sessions_cpu(results, size, "plain_spark"))
        if sessions:
            out[f"compare_sessions_cpu_s_{suffix}"] = round(sessions, 2)
        if sessions and native:
            # Warm against warm: the sessions task on the engine that ran the tasks before it,
            # session_window in the lean job's process after its silver.
            out[f"sessions_ratio_to_native_spark_warm_{suffix}"] = round(sessions / native, 2)
        peaks = [job.get("jvm_peak_rss_bytes") for job in jobs(results, size, "project")]
        if any(peaks):
            # the driver JVM of the project's run (its engine), the largest over the repetitions
            out[f"engine_peak_rss_gib_{suffix}"] = round(max(p for p in peaks if p) / 2**30, 2)
    if len(sizes) >= 2:  # the marginal cost: events per CPU-s between the smallest and largest size
        first, last = sizes[0], sizes[-1]
        events = results["datasets"][last]["lines"] - results["datasets"][first]["lines"]
        for contender in ("project", "plain_spark", "polars"):
            low = median(samples(results, first, contender))
            high = median(samples(results, last, contender))
            if low and high and high > low:
                out[f"marginal_events_per_cpu_s_{contender}"] = round(events / (high - low))
    return out
