"""The fixed cost of a small hourly run (issue 60): every task's CPU for one ~2,000-event hour.

Usage (from the repository, ``make bench-small-hour`` runs it):
    python -m bench.small_hour [--events 2000] [--warm-hours 6] [--work .local/bench/small_hour] [--before BEFORE.json]
    python -m bench.small_hour --from NOW.json --before BEFORE.json   # save two earlier runs, no Spark

``--before``: an earlier run's figures (``--raw`` of this command at another commit, e.g. run in a
``git archive`` copy of it), shown beside this run's, task by task.

A fresh lakehouse under ``--work``, campaigns and 3 producer hours from the project's generator,
and a private warm engine on a free port. Every task (``python -m lakehouse.catalog``'s order, the
DAG's) runs once as a Connect client (``python jobs/run.py <task>``) to prime the checkpoints, then
once per hour for ``--warm-hours`` new hours, as an engine that has run for a while (its JIT
compiler's share falls with its age); then one new hour of ``--events`` events lands and every task
runs again, measured: each task's client process tree (CPU, wall) and the engine's process tree
(its JVM and Python workers, ``/proc``), the engine's split by part (``bench.harness.jvm_parts``);
and each task's mean over the warm hours after the first and this one, the figure a change is
judged by (one hour's moves by a fifth on this machine).
Then late events land (events more than an hour older than the newest, of a user whose session
stays open, so they stay pending), every task runs to record them, and every task runs once more
with nothing new: the no-data run with late events pending, then twice more as a DAG run through
``airflow dags test ysb_hourly`` (a private Airflow home; the second run is the figure, the first
pays for a new home's DAG parsing). Last, every table is checked against the plain-Python oracle,
so a speed-up that breaks a result shows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.compare.check import against_oracle
from bench.harness import (
    PROJECT_DIR,
    Engine,
    become_subreaper,
    cpu_between,
    jvm_parts,
    jvm_parts_between,
    run_tree,
    tree_cpus,
)
from bench.render import publish
from lakehouse import catalog
from lakehouse.config import Lakehouse
from lakehouse.files import write_atomic
from lakehouse_tools import engine
from lakehouse_tools.generator import write_campaigns, write_hours

START = datetime(2026, 11, 20, tzinfo=UTC)
SEED = 60  # campaigns and events from the same seed, or every line is an unknown ad
MINUTE_MS = 60_000


def engine_cpus(include_server: bool = True) -> dict[int, float]:
    """pid -> CPU seconds so far of the engine's processes: its JVM's tree (its Python workers
    when Spark starts them) and the fork server's (when it forks them: ``python_workers``)."""
    roots = [engine.python_workers_pid()] + ([engine.server_pid()] if include_server else [])
    return {pid: cpu for root in roots if root for pid, cpu in tree_cpus(root).items()}


def run_tasks(label: str, lake: Lakehouse, logs: Path) -> dict:
    """Every task in the DAG's order as a Connect client: per task CPU (client, engine) and wall."""
    tasks = {}
    for spec in catalog.tasks():
        summary_file = logs / f"{label}-{spec.task}.json"
        env = {**os.environ, "LAKEHOUSE_SUMMARY_FILE": str(summary_file)}
        command = [sys.executable, str(PROJECT_DIR / "jobs" / "run.py"), spec.task]
        server = engine.server_pid()
        before, parts_before = engine_cpus(), jvm_parts(server)
        forks_before = engine_cpus(include_server=False)
        code, wall, client = run_tree(
            command + ["--lakehouse-root", lake.root], env, logs / f"{label}-{spec.task}.log", 1800
        )
        engine_cpu = cpu_between(before, engine_cpus())
        parts = jvm_parts_between(parts_before, jvm_parts(server))
        forked = cpu_between(forks_before, engine_cpus(include_server=False))
        parts["python"] = round(parts["python"] + forked, 2)
        if code != 0:
            raise RuntimeError(f"{label}: {spec.task} failed, see {logs}/{label}-{spec.task}.log")
        summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
        tasks[spec.task] = {
            "client_cpu_s": round(client, 2),
            "engine_cpu_s": round(engine_cpu, 2),
            "cpu_s": round(client + engine_cpu, 2),
            "wall_s": round(wall, 2),
            "engine_parts": parts,
            **{
                k: summary[k]
                for k in ("not_started", "late_pending", "late_reconciled")
                if k in summary
            },
        }
        print(
            f"{label:>12} {spec.task:<24} client {client:5.1f}  engine {engine_cpu:5.1f}  wall {wall:5.1f} s",
            flush=True,
        )
    return {
        "tasks": tasks,
        **{
            f"total_{key}": round(sum(t[key] for t in tasks.values()), 2)
            for key in ("client_cpu_s", "engine_cpu_s", "cpu_s", "wall_s")
        },
    }


# Airflow's own floor: the same command for a DAG of as many tasks as a no-data run starts, each
# doing nothing (``airflow dags test`` imports Airflow, parses the folder and builds its in-process
# API before the first task).
FLOOR_DAG = """
from airflow.sdk import chain, dag, task

@dag(schedule=None)
def airflow_floor():
    chain(*(task(task_id=f"noop_{n}")(lambda: None)() for n in range(TASKS)))

airflow_floor()
"""


def dag_runs_with_nothing_new(
    lake: Lakehouse, work: Path, runs: int = 2, dag_id: str = "ysb_hourly"
) -> list[dict]:
    """``airflow dags test ysb_hourly`` ``runs`` times on the lakehouse as it is: each run's wall
    and CPU (the Airflow process tree and the engine's). ``dag_id="airflow_floor"``: the same for
    :data:`FLOOR_DAG` (8 tasks) in a folder of its own."""
    from airflow_env import airflow_environment, migrate

    home = work / ("airflow" if dag_id == "ysb_hourly" else dag_id)
    migrate(home)
    env = airflow_environment(home, lake)
    if dag_id == "airflow_floor":
        (home / "dags").mkdir(exist_ok=True)
        (home / "dags" / "floor.py").write_text(FLOOR_DAG.replace("TASKS", "8"))
        env["AIRFLOW__CORE__DAGS_FOLDER"] = str(home / "dags")
    measured = []
    for run in range(runs):
        before = engine_cpus()
        logical = (START + timedelta(days=30, hours=run)).isoformat()
        log = work / "logs" / f"{dag_id}-run-{run + 1}.log"
        command = [str(Path(sys.executable).parent / "airflow"), "dags", "test", dag_id, logical]
        code, wall, cpu = run_tree(command, env, log, 1800)
        if code != 0 or "state=success" not in log.read_text():
            raise RuntimeError(f"the DAG run failed, see {log}")
        engine_cpu = cpu_between(before, engine_cpus())
        measured.append(
            {
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu + engine_cpu, 2),
                "engine_cpu_s": round(engine_cpu, 2),
            }
        )
        print(
            f"{'dag run':>12} {dag_id} {run + 1:<12} cpu {cpu + engine_cpu:5.1f}  wall {wall:5.1f} s",
            flush=True,
        )
    return measured


def land_late_events(lake: Lakehouse, newest_hour: datetime, users: int = 3) -> int:
    """Land, in a new producer-hour folder, a chain of events per user from 70 minutes before the
    newest event time up to the newest: the older ones are behind the watermark (late), and as the
    chain's session is still open, they stay pending."""
    hour_dir = Path(lake.landing_events) / newest_hour.strftime("%Y-%m-%d/%H")
    landed = []
    for path in sorted(hour_dir.glob("part-*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                landed.append(json.loads(line))
            except ValueError:  # the generator's malformed lines
                pass
    landed = [
        event
        for event in landed
        if isinstance(event, dict) and event.get("event_time", "").isdigit()
    ]
    template, newest_ms = landed[0], max(int(event["event_time"]) for event in landed)
    lines = []
    for user in range(users):
        user_id = str(uuid.UUID(int=user + 1))
        for minutes in (70, 50, 30, 12, 0):  # 20 minutes apart at most: one session
            event = {
                **template,
                "event_id": str(uuid.uuid4()),
                "user_id": user_id,
                "event_time": str(newest_ms - minutes * MINUTE_MS),
            }
            lines.append(json.dumps(event))
    later = newest_hour + timedelta(hours=1)
    write_atomic(
        Path(lake.landing_events) / later.strftime("%Y-%m-%d/%H") / "part-late.jsonl",
        "".join(f"{line}\n" for line in lines),
    )
    return len(lines)


def measure(events: int, work: Path, warm_hours: int, hours: int = 3) -> dict:
    """The scenario: prime, a new small hour measured, late events, a no-data run measured, the oracle."""
    shutil.rmtree(work, ignore_errors=True)
    logs = work / "logs"
    logs.mkdir(parents=True)
    lake = Lakehouse(root=str(work / "lakehouse"))
    os.environ.update(LAKEHOUSE_ROOT=lake.root, LAKEHOUSE_ENGINE="connect")
    eps = events / 3600
    write_campaigns(lake, seed=SEED)
    write_hours(lake, START, hours, events_per_second=eps, seed=SEED)
    server = Engine(work / "engine")
    server.up()
    # After the engine's start: its supervisor, orphaned, must not become this process's child
    # (run_tree kills the children still alive a minute after a task).
    become_subreaper()
    try:
        run_tasks("prime", lake, logs)
        warm_runs = []
        for warm in range(warm_hours):
            write_hours(lake, START + timedelta(hours=hours), 1, events_per_second=eps, seed=SEED)
            warm_runs.append(run_tasks(f"warm-{warm + 1}", lake, logs))
            hours += 1
        write_hours(lake, START + timedelta(hours=hours), 1, events_per_second=eps, seed=SEED)
        small = run_tasks("small_hour", lake, logs)
        late = land_late_events(lake, START + timedelta(hours=hours))
        run_tasks("late_landed", lake, logs)
        idle = run_tasks("no_new_data", lake, logs)
        dag_runs = dag_runs_with_nothing_new(lake, work)
        floor = dag_runs_with_nothing_new(lake, work, dag_id="airflow_floor")
    finally:
        server.down()
    tables = {spec.name: lake.table(spec.name).path for spec in catalog.tables()}
    verdicts = against_oracle(lake.landing_events, lake.landing_campaigns, tables)
    wrong = {name: v["detail"] for name, v in verdicts.items() if not v["ok"]}
    sessions = next(s.task for s in catalog.tasks() if s.write is catalog.Write.SESSIONS)
    return {
        "events_per_hour": int(eps * 3600),
        "warm_hours": warm_hours,
        "late_events_landed": late,
        "small_hour": small,
        "no_new_data_late_pending": idle,
        "small_hour_cpu_s": small["total_cpu_s"],
        # The first warm hour still pays the engine's early compilation.
        "steady_hours": mean_per_task([*warm_runs[1:], small]),
        "no_new_data_late_pending_sessions_s": idle["tasks"][sessions]["wall_s"],
        "no_new_data_late_pending_sessions_cpu_s": idle["tasks"][sessions]["cpu_s"],
        "no_new_data_dag_runs": dag_runs,
        "no_new_data_dag_run_late_pending_s": dag_runs[-1]["wall_s"],
        "airflow_floor_dag_runs": floor,
        "oracle_ok": not wrong,
        "oracle_differences": wrong,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def mean_per_task(runs: list[dict]) -> dict:
    """Each task's mean CPU-s over ``runs`` (hourly runs of every task, :func:`run_tasks`)."""
    tasks = {
        task: round(sum(run["tasks"][task]["cpu_s"] for run in runs) / len(runs), 2)
        for task in runs[-1]["tasks"]
    }
    return {"runs": len(runs), "tasks": tasks, "total_cpu_s": round(sum(tasks.values()), 2)}


def steady_table(now: dict, before: dict | None) -> list[str]:
    """Each task's mean over the last hourly runs, beside the run ``--before`` gave when it has them."""
    steady = now.get("steady_hours")
    if not steady:
        return []
    earlier = (before or {}).get("steady_hours")
    head = "| task | " + ("mean CPU-s before | " if earlier else "") + "mean CPU-s |"
    rows = [
        f"*each task's mean over the last {steady['runs']} hourly runs* (warm hours 2 to "
        f"{now['warm_hours']} and the new hour; what a change is judged by: one hour's figure "
        "moves by a fifth):",
        "",
        head,
        "| --- |" + " ---: |" * (head.count("|") - 2),
    ]
    totals = ("**all tasks**", steady["total_cpu_s"], (earlier or {}).get("total_cpu_s"))
    gone = [t for t in (earlier or {}).get("tasks", {}) if t not in steady["tasks"]]
    for task, mine, theirs in [
        *(
            (t, steady["tasks"].get(t, "-"), (earlier or {}).get("tasks", {}).get(t, "-"))
            for t in [*steady["tasks"], *gone]
        ),
        totals,
    ]:
        rows.append(f"| {task} | " + (f"{theirs} | " if earlier else "") + f"{mine} |")
    return [*rows, ""]


def render(results: dict) -> str:
    """The section: every task's CPU-s and wall, this run beside the run ``--before`` gave."""
    now, before = results["now"], results.get("before")
    warmed = (
        f" that ran {now['warm_hours']} hourly runs before this one"
        if now.get("warm_hours")
        else ""
    )
    rows = []
    for run, title in (
        ("small_hour", "a new 2,000-event hour"),
        ("no_new_data_late_pending", "nothing new, late events pending"),
    ):
        head = (
            "| task | "
            + ("CPU-s before | " if before else "")
            + "CPU-s | of it the engine's | wall s |"
        )
        rows += [
            f"*{title}* ({now['events_per_hour']:,} events an hour, every task as a client of a warm "
            f"engine{warmed}):",
            "",
            head,
            "| --- |" + " ---: |" * (head.count("|") - 2),
        ]
        # a task of one side only (tasks merged or split by the change) shows "-" on the other
        gone = [t for t in (before[run]["tasks"] if before else {}) if t not in now[run]["tasks"]]
        total = {k: now[run][f"total_{k}"] for k in ("cpu_s", "engine_cpu_s", "wall_s")}
        for task in [*now[run]["tasks"], *gone, "**all tasks**"]:
            mine = now[run]["tasks"].get(task, total if task == "**all tasks**" else {})
            earlier = (
                (
                    (before[run]["tasks"].get(task) or {}).get("cpu_s", "-")
                    if task != "**all tasks**"
                    else before[run]["total_cpu_s"]
                )
                if before
                else None
            )
            cells = ([f"{earlier}"] if before else []) + [
                f"{mine.get(k, '-')}" for k in ("cpu_s", "engine_cpu_s", "wall_s")
            ]
            rows.append(f"| {task} | " + " | ".join(cells) + " |")
        rows.append("")
        if run == "small_hour":
            rows += steady_table(now, before)
    if now.get("no_new_data_dag_runs"):

        def walls(runs: list[dict]) -> str:
            return ", ".join(f"{r['wall_s']} s ({r['cpu_s']} CPU-s)" for r in runs)

        earlier = (before or {}).get("no_new_data_dag_runs")
        rows += [
            "*nothing new, late events pending, as a DAG run* (`airflow dags test ysb_hourly`, a "
            f"new Airflow home, its first run then its second): {walls(now['no_new_data_dag_runs'])}"
            + (f"; before: {walls(earlier)}" if earlier else "")
            + "."
            + (
                f" The same command for a DAG of 8 tasks that do nothing (Airflow's own floor): "
                f"{walls(now['airflow_floor_dag_runs'])}."
                if now.get("airflow_floor_dag_runs")
                else ""
            ),
            "",
        ]
    rows += engine_parts_table(now["small_hour"], before and before["small_hour"])
    rows.append(
        f"Measured {now['measured_at']}"
        + (
            f"; before: {results.get('before_label', 'an earlier commit')}, measured {before['measured_at']}"
            if before
            else ""
        )
        + f"; every table checked against the oracle: {'equal' if now['oracle_ok'] else 'DIFFERS'}."
    )
    return "\n".join(rows)


# The engine's CPU by part (bench.harness.jvm_parts), as the section names them.
ENGINE_PARTS = {
    "jit": "JIT compiler",
    "tasks": "Spark's task threads",
    "python": "Python workers",
    "other": "the rest of the JVM",
}


def part_totals(run: dict) -> dict[str, float]:
    """The engine's CPU of every task of ``run`` by part (empty for results measured before the
    parts were)."""
    tasks = [f["engine_parts"] for f in run["tasks"].values() if "engine_parts" in f]
    return {part: round(sum(p[part] for p in tasks), 2) for part in ENGINE_PARTS} if tasks else {}


def engine_parts_table(run: dict, before: dict | None = None) -> list[str]:
    """Where the engine's CPU of each task of ``run`` went, and the totals of ``before``'s."""
    tasks = {task: f["engine_parts"] for task, f in run["tasks"].items() if "engine_parts" in f}
    if not tasks:
        return []
    totals, earlier = part_totals(run), part_totals(before) if before else {}
    return [
        "*where the engine's CPU-s of the new hour went* (its compiler threads, the threads running "
        "Spark's tasks, its Python workers (foreachBatch functions, Python UDFs), and the rest: "
        "the driver planning queries, reading Delta logs, committing, running the streams):",
        "",
        "| task | " + " | ".join(ENGINE_PARTS.values()) + " |",
        "| --- |" + " ---: |" * len(ENGINE_PARTS),
        *(
            f"| {task} | " + " | ".join(f"{round(parts[p], 2)}" for p in ENGINE_PARTS) + " |"
            for task, parts in [*tasks.items(), ("**all tasks**", totals)]
            + ([("**all tasks, before**", earlier)] if earlier else [])
        ),
        "",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="events of the measured hour")
    parser.add_argument(
        "--warm-hours", type=int, default=6, help="hourly runs before the measured one"
    )
    parser.add_argument(
        "--work", type=Path, default=PROJECT_DIR / ".local" / "bench" / "small_hour"
    )
    parser.add_argument("--raw", type=Path, help="also write this run's figures to this file")
    parser.add_argument(
        "--from",
        dest="saved",
        type=Path,
        help="an earlier run's figures (--raw), not measured again",
    )
    parser.add_argument(
        "--before", type=Path, help="figures (--raw) of the code before, shown beside"
    )
    parser.add_argument(
        "--before-label", default="the code before", help="what --before ran, e.g. a commit"
    )
    parser.add_argument("--out", help="render that Markdown file (BENCHMARKS.md) from the results")
    parser.add_argument(
        "--summary",
        help="update this benchmark's keys in that JSON file (bench/results/summary.json)",
    )
    args = parser.parse_args(argv)
    figures = (
        json.loads(args.saved.read_text())
        if args.saved
        else measure(args.events, args.work.absolute(), args.warm_hours)
    )
    if args.raw:
        args.raw.write_text(json.dumps(figures, indent=2) + "\n")
    print(
        f"small hour: {figures['small_hour_cpu_s']} CPU-s; no-data run with late events pending: "
        f"sessions {figures['no_new_data_late_pending_sessions_s']} s; oracle "
        f"{'ok' if figures['oracle_ok'] else 'DIFFERS: ' + str(figures['oracle_differences'])}"
    )
    if not figures["oracle_ok"]:
        sys.exit(1)
    results = {"now": figures}
    if args.before:
        results.update(before=json.loads(args.before.read_text()), before_label=args.before_label)
    idle, floor = figures["no_new_data_late_pending"], figures.get("airflow_floor_dag_runs")
    publish(
        render(results),
        args.out,
        args.summary,
        {
            "small_hour_cpu_s": figures["small_hour_cpu_s"],
            "no_new_data_late_pending_tasks_cpu_s": idle["total_cpu_s"],
            "no_new_data_late_pending_tasks_s": idle["total_wall_s"],
            "no_new_data_late_pending_sessions_s": figures["no_new_data_late_pending_sessions_s"],
            "no_new_data_dag_run_late_pending_s": figures["no_new_data_dag_run_late_pending_s"],
            # what `airflow dags test` costs for 8 tasks that do nothing: the floor of the above
            **({"airflow_dags_test_floor_s": floor[-1]["wall_s"]} if floor else {}),
        },
        benchmark="small_hour",
        results=results,
    )


if __name__ == "__main__":
    main()
