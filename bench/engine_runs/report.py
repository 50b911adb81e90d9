"""The benchmark's section of BENCHMARKS.md and its keys of summary.json, from a saved run's results."""

from __future__ import annotations

from bench.engine_runs import CONNECT, ENGINE_LABELS, SUBMIT, SUMMARY_KEYS
from bench.harness import cell, median
from lakehouse import catalog

# Report rows that are a part of a step's runs: the first scheduled run after the services start
# pays their one-time warm-ups (until eea2bdd, the api-server's execution API, built on the first
# task's call), so it is reported apart from the runs after it.
PARTS = {"scheduled_first": ("scheduled", slice(0, 1)), "scheduled": ("scheduled", slice(1, None))}


def samples(results: dict, kind: str, step: str, measure: str) -> list[float]:
    """Every successful step's ``measure`` for ``kind`` (the idle step has several per repetition)."""
    out = []
    step, part = PARTS.get(step, (step, slice(None)))
    for run in results["runs"]:
        if run["kind"] != kind:
            continue
        found = run["steps"].get(step)
        for entry in found[part] if isinstance(found, list) else [found] if found else []:
            if entry["ok"] and entry.get(measure) is not None:
                out.append(entry[measure])
    return out


def ratio(results: dict, step: str, measure: str) -> str:
    connect, submit = (
        median(samples(results, CONNECT, step, measure)),
        median(samples(results, SUBMIT, step, measure)),
    )
    if not connect or not submit:
        return "–"
    return f"{submit / connect:.1f}×"


def anomalies(results: dict) -> list[str]:
    """What did not go as expected: errors, failed steps, and the retried tasks (summed per step and kind)."""
    out, retried = [], {}
    for run in results["runs"]:
        where = f"rep {run['rep'] + 1}, {run['kind']}"
        if run.get("error"):
            out.append(f"{where}: {run['error'].strip().splitlines()[0][:300]}")
        for value in run["steps"].values():
            for entry in value if isinstance(value, list) else [value]:
                out += [f"{where}, {entry['name']}: {a}" for a in entry["anomalies"]]
                for task in entry.get("retried", []):
                    key = (entry["name"].split("-")[0], run["kind"], task["task"])
                    counts = retried.setdefault(key, {"extra": 0, "why": set()})
                    counts["extra"] += task["extra"]
                    counts["why"].add(task["why"])
    steps = {
        "first": "first run",
        "idle": "no-new-data run",
        "small": "small hourly run",
        "scheduled": "small hourly run through a scheduler",
        "backfill": "backfill",
    }
    for (step, kind, task), counts in sorted(retried.items()):
        out.append(
            f"{steps.get(step, step)}, {kind}: `{task}` retried {counts['extra']}× in all; first attempt: "
            + "; ".join(f"`{why}`" for why in sorted(counts["why"]))
        )
    return out


def render(results: dict) -> str:
    o = results["options"]
    load, end_load = results["load_at_start"], results.get("load_at_end")
    starts = engine_starts(results)
    rows = [
        (
            "first",
            "First DAG run: 3 hours (primes every checkpoint)",
            ("wall", "cpu", "engine_cpu"),
        ),
        (
            "idle",
            "**(a) DAG run with no new data**",
            ("wall", "cpu", "engine_cpu", "spark_tasks", "preflight"),
        ),
        (
            "small",
            f"**(b) small hourly DAG run** (1 new hour at {o['events_per_second']} events/s)",
            ("wall", "cpu", "engine_cpu", "spark_tasks", "preflight"),
        ),
        (
            "scheduled_first",
            "(b′) the same through a running scheduler, its first run after the services start "
            "(1 new hour, `airflow dags trigger` → the run's end)",
            ("wall", "runs_span", "cpu", "engine_cpu"),
        ),
        (
            "scheduled",
            "**(b″) the same through a running scheduler, the runs after it**",
            ("wall", "runs_span", "cpu", "engine_cpu", "spark_tasks"),
        ),
        (
            "backfill",
            "**(c) 3-hour backfill** through a scheduler (command → all 3 runs succeeded)",
            ("wall", "cpu", "engine_cpu", "runs_span", "spark_tasks", "retries"),
        ),
    ]
    names = {
        "wall": "wall s",
        "cpu": "CPU s (all processes, engine included)",
        "engine_cpu": "— of which the engine's CPU s",
        "spark_tasks": "— Spark tasks' wall s, summed",
        "runs_span": "— the runs' own span s (first start → last end, metadata DB)",
        "preflight": "— the preflight task's wall s (checks the Spark connection)",
        "retries": "— task retries (Airflow's, 1 min apart)",
    }
    labels = {
        (step, "runs_span"): "— the run's own span s (queued → end, metadata DB)" for step in PARTS
    }
    table = [
        f"| DAG run | {ENGINE_LABELS[CONNECT]} | {ENGINE_LABELS[SUBMIT]} | spark-submit / connect |",
        "| --- | ---: | ---: | ---: |",
    ]
    for step, title, measures in rows:
        for index, measure in enumerate(measures):
            label = (
                f"{title}, {names[measure]}"
                if index == 0
                else labels.get((step, measure), names[measure])
            )
            submit = (
                "–" if measure == "engine_cpu" else cell(samples(results, SUBMIT, step, measure))
            )
            factor = (
                ratio(results, step, measure) if measure in ("wall", "cpu", "runs_span") else ""
            )
            if measure == "retries":
                submit = cell(samples(results, SUBMIT, step, measure), 0)
            connect = cell(
                samples(results, CONNECT, step, measure), 0 if measure == "retries" else 1
            )
            table.append(f"| {label} | {connect} | {submit} | {factor} |")
    reps = o["reps"]
    command = (
        f"python -m bench.engine_runs --reps {reps}"
        + (f" --idle-runs {o['idle_runs']}" if o["idle_runs"] != 1 else "")
        + (
            f" --scheduled-runs {o.get('scheduled_runs', 0)}"
            if o.get("scheduled_runs", 0) != 2
            else ""
        )
    )
    out = [
        f"* **Command:** `make bench-engine` (`{command} --out BENCHMARKS.md --summary bench/results/summary.json`)",
        f"* **Date:** {results['measured_at']}; load average at the start {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}"
        + (
            f" (at the end {end_load[0]:.1f}, {end_load[1]:.1f}, {end_load[2]:.1f})"
            if end_load
            else ""
        )
        + "".join(
            f"; interrupted, resumed at {r['at']} (load {r['load'][0]:.1f}, {r['load'][1]:.1f}, {r['load'][2]:.1f}) "
            "for the runs it had not finished"
            for r in results.get("resumed", [])
        )
        + f"; {results['cores']} cores, {results['machine']}",
        f"* **Work:** {reps} repetition(s), each kind of Spark in a fresh Airflow home (SQLite, LocalExecutor) and "
        "lakehouse, the kinds in alternating order (connect, submit, submit, connect, ...): 3 generated hours "
        f"at {o['events_per_second']} events/s processed by a first `airflow dags test ysb_hourly`, then "
        f"{o['idle_runs']} run(s) with nothing new (a), one new hour then one run (b), "
        f"{o.get('scheduled_runs', 0)} more new hour(s) each triggered on an api-server, scheduler and dag-processor "
        "started beforehand, untimed, as in production (b′ the first run after their start, b″ the others), "
        "and `airflow backfill create` "
        "of event hours 00:00–02:00 executed by an api-server, scheduler and dag-processor started after the "
        "command (c; their start-up is in the wall time, the runs' own span is the row below it; the "
        "scheduler's own hourly schedule off, so only the 3 backfill runs execute, up to 3 at once).",
        f"* **Spark:** connect = the Airflow connection `spark_lakehouse` of type `spark_connect`, every Spark task "
        f"a client in its task's process of one engine (`local[2]`, port {o['engine_port']}) started before "
        "anything is timed: start-up "
        + (f"{starts[0][0]:.1f} s wall, {starts[0][1]:.1f} s CPU" if starts else "not measured")
        + "".join(
            f" (restarted for the resumed runs: {wall:.1f} s, {cpu:.1f} s CPU)"
            for wall, cpu in starts[1:]
        )
        + ", i.e. `python -m lakehouse_tools.engine up` until the server answers a query, once per benchmark. "
        'submit = `{"conn_type": "spark", "host": "local[2]"}`, one spark-submit per Spark task, driver '
        f"JVM options `{o['submit_java_options'] or '(none)'}` (the tests' fast start).",
        *code_line(results),
        "* **CPU** = user + system seconds of every process of the step (the Airflow command or services, task "
        "processes, spark-submit JVMs and Python drivers) plus, for connect, the engine's server JVM and its "
        "Python workers over the same interval. Median (min–max) over the repetitions.",
        "",
        *table,
        "",
        interpretation(results),
        *[f"\n{note}" for note in results.get("notes", [])],
    ]
    found = anomalies(results)
    if found:
        out += ["", "Not as expected in this run:", ""] + [f"* {a}" for a in found]
    return "\n".join(out) + "\n"


def code_line(results: dict) -> list[str]:
    """The project's version the runs started with (a list item), when they recorded it."""
    versions = {}
    for run in results["runs"]:
        if run.get("commit"):
            versions.setdefault(run["commit"], []).append(f"rep {run['rep'] + 1} {run['kind']}")
    if not versions:
        return []
    if len(versions) == 1:
        return [f"* **Code:** {next(iter(versions))}"]
    return [
        "* **Code:** it changed during the run: "
        + "; ".join(f"{v} ({', '.join(r)})" for v, r in versions.items())
    ]


def interpretation(results: dict) -> str:
    """A paragraph reading the figures (each sentence only when its figures exist)."""

    def m(kind, step, measure="wall"):
        return median(samples(results, kind, step, measure))

    parts, spark_tasks = [], results.get("spark_tasks") or len(catalog.tasks())
    idle_c, idle_s = m(CONNECT, "idle"), m(SUBMIT, "idle")
    if idle_c and idle_s:
        cpu_c, cpu_s = m(CONNECT, "idle", "cpu"), m(SUBMIT, "idle", "cpu")
        tasks_c, preflight_c = m(CONNECT, "idle", "spark_tasks"), m(CONNECT, "idle", "preflight")
        preflight_s = m(SUBMIT, "idle", "preflight")
        parts.append(
            f"With nothing new, a DAG run on the warm engine takes {idle_c:.0f} s instead of {idle_s:.0f} s"
            + (f", {cpu_c:.0f} s of CPU instead of {cpu_s:.0f} s" if cpu_c and cpu_s else "")
            + f": by spark-submit each of the {spark_tasks} Spark tasks starts a JVM and builds a Delta session "
            "only to find nothing new; on the engine each is a client whose freshness check reads a "
            "few files and starts no query"
            + (f" (all {spark_tasks} together {tasks_c:.1f} s)" if tasks_c is not None else "")
            + ". What is left is Airflow's own cost: parsing, task start-up, the metadata DB and the other tasks"
            + (
                f" (the preflight task, the first, takes {preflight_c:.0f} s on the engine and {preflight_s:.0f} s by "
                "spark-submit: most of it is `airflow dags test` building its in-process execution API on the "
                "first task's start; the preflight's own check of the engine is one gRPC call)"
                if preflight_c and preflight_s
                else ""
            )
            + "."
        )
    small_c, small_s = m(CONNECT, "small"), m(SUBMIT, "small")
    if small_c and small_s:
        cpu_c, cpu_s = m(CONNECT, "small", "cpu"), m(SUBMIT, "small", "cpu")
        engine_c = m(CONNECT, "small", "engine_cpu")
        parts.append(
            f"With one new hour the engine takes {small_c:.0f} s vs {small_s:.0f} s"
            + (f" ({cpu_c:.0f} s vs {cpu_s:.0f} s of CPU)" if cpu_c and cpu_s else "")
            + (
                f"; here the engine's own CPU ({engine_c:.0f} s) is the queries' work, a JVM that is already "
                "compiled rather than one per task"
                if engine_c
                else ""
            )
            + "."
        )
    sched_c, sched_s = m(CONNECT, "scheduled", "runs_span"), m(SUBMIT, "scheduled", "runs_span")
    first_c = m(CONNECT, "scheduled_first", "runs_span")
    if sched_c and sched_s:
        parts.append(
            f"Through a running scheduler, as the hourly schedule runs it, the same small hour takes {sched_c:.1f} s "
            f"from queue to end on the engine and {sched_s:.0f} s by spark-submit: no `dags test` start-up and no "
            "in-process execution API, each task a process of its own, the four tasks after silver side by side"
            + (
                f"; the first run after the services start took {first_c:.1f} s (the services' one-time warm-ups)"
                if first_c
                else ""
            )
            + "."
        )
    back_c, back_s = m(CONNECT, "backfill"), m(SUBMIT, "backfill")
    if back_c and back_s:
        span_c, span_s = m(CONNECT, "backfill", "runs_span"), m(SUBMIT, "backfill", "runs_span")
        retried = [r for r in samples(results, CONNECT, "backfill", "retries") if r]
        retries_s = max(samples(results, SUBMIT, "backfill", "retries") or [0])
        cpu_c, cpu_s = m(CONNECT, "backfill", "cpu"), m(SUBMIT, "backfill", "cpu")
        parts.append(
            f"The 3-hour backfill through the scheduler takes {back_c:.0f} s vs {back_s:.0f} s"
            + (
                f" (the runs themselves {span_c:.0f} s vs {span_s:.0f} s)"
                if span_c and span_s
                else ""
            )
            + (f" and {cpu_c:.0f} s vs {cpu_s:.0f} s of CPU" if cpu_c and cpu_s else "")
            + "; its 3 runs run at once, so by spark-submit several drivers at a time share the 2 cores, on the engine "
            "their clients share one JVM."
        )
        if retried and not retries_s:
            reps = len(samples(results, CONNECT, "backfill", "retries"))
            parts.append(
                f"In {len(retried)} of {reps} repetitions the engine's backfill paid Airflow retries (a minute "
                f"apart; {', '.join(f'{r:.0f}' for r in retried)}) of gold tasks whose replace-hours write lost a "
                "Delta conflict to a concurrent run (`DELTA_CONCURRENT_APPEND`, listed below): "
                "`lakehouse.sinks.with_conflict_retries` retries such a conflict within the job, "
                "and did by spark-submit, but these arrived over Spark Connect as pyspark's `UnknownException`, "
                "which it did not recognise as a conflict."
            )
    if not parts:
        return "Too few successful runs to compare."
    parts.append(
        "CPU is the figure to trust on a shared machine: the wall times move with the load (above)."
    )
    return " ".join(parts)


def summary_figures(results: dict) -> dict:
    """The medians bench/results/summary.json holds (connect unsuffixed, spark-submit ``_spark_submit``)."""
    out: dict = {}
    for key, step in SUMMARY_KEYS.items():
        for kind, suffix in ((CONNECT, ""), (SUBMIT, "_spark_submit")):
            out[f"{key}{suffix}_s"] = _round(median(samples(results, kind, step, "wall")))
            out[f"{key}{suffix}_cpu_s"] = _round(median(samples(results, kind, step, "cpu")))
        out[f"{key}_engine_cpu_s"] = _round(median(samples(results, CONNECT, step, "engine_cpu")))
    for kind, suffix in ((CONNECT, ""), (SUBMIT, "_spark_submit")):
        for step in PARTS:
            out[f"small_hourly_{step}_run{suffix}_s"] = _round(
                median(samples(results, kind, step, "runs_span"))
            )
            out[f"small_hourly_{step}_run{suffix}_cpu_s"] = _round(
                median(samples(results, kind, step, "cpu"))
            )
    out["backfill_3h_runs_span_s"] = _round(
        median(samples(results, CONNECT, "backfill", "runs_span"))
    )
    out["backfill_3h_runs_span_spark_submit_s"] = _round(
        median(samples(results, SUBMIT, "backfill", "runs_span"))
    )
    starts = engine_starts(results)
    out["engine_start_s"] = _round(median([wall for wall, _ in starts]))
    out["engine_start_cpu_s"] = _round(median([cpu for _, cpu in starts]))
    out["engine_bench_reps"] = results["options"]["reps"]
    out["measured_at"] = results["measured_at"]
    return out


def engine_starts(results: dict) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each start of the benchmark engine: the first, then one per resumption."""
    return [
        (start["wall"], start["cpu"])
        for key in ("engine_start", "engine_restart")
        if (start := results.get(key))
    ]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
