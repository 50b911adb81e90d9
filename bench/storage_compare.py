"""The lakehouse on S3 beside local disk: the whole hourly run, side by side in one run.

Usage (``make bench-storage`` runs it):
    python -m bench.storage_compare [--sizes demo,1M] [--reps 1] [--storages local,s3]
        [--results bench/results/storage_compare.json] [--out BENCHMARKS.md] [--summary bench/results/summary.json]

Sizes: ``demo`` is ``make demo``'s data (3 generated hours at 2 events/s, seed 7, from the demo's
start: 21,600 events); ``1M`` one generated hour at 278 events/s (1,000,800 events); ``300k`` one
hour at 83.4. Each size is generated once into ``.local/bench/storage/data-<size>`` and its oracle
(lakehouse_tools.oracle, plain Python) computed once from those files.

Each storage gets servers of its own, started for this run and stopped (their process groups) at
its end, as tests/s3 does: for ``s3`` a private S3 server (include/s3/server.py on a free port,
its own keys) and an engine started for an ``s3a://`` root (with the S3 jars); for ``local`` an
engine of its own too. Nothing of the user's engine or S3 server is touched. Both run without the
table-name metastore (``LAKEHOUSE_METASTORE=none``, as the S3 tests do), so neither pays for it.

A run: a fresh lakehouse (a folder, or a prefix of the bucket) into which the size's landing files
are put (untimed), then every task the catalog declares, in DAG order, in one client process of
the engine (tests/helpers.run_job, as run_pipeline runs them). Measured: the client process's wall
seconds; CPU seconds of the client (reaped) plus the engine's whole process tree (the JVM and its
Python workers: /proc sampled every half second, per process, so workers that end during the run
count up to their last sample); for S3 the server's request counts by kind before and after the
run, and the server's own CPU (reported apart: it is the store, not the lakehouse). Every table the
catalog declares is then read back through the engine: bronze, silver, the quarantine and every
gold table must equal the oracle (tests/helpers.assert_tables_match_oracle), else the benchmark
fails. A table the hourly run did not write is named in a line of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.harness import children_cpu, markers, proc_stats, tree_cpu

PROJECT_DIR = Path(__file__).resolve().parents[1]
WORK = PROJECT_DIR / ".local" / "bench" / "storage"
SEED = 7
DEMO_START = datetime(2026, 11, 20, 0, tzinfo=UTC)
LOCAL, S3 = "local", "s3"
BUCKET = "lakehouse"
# The row counts a task's summary reports (as the demo prints them).
ROW_KEYS = ("input_rows", "rows_written", "inserted", "quarantined")


@dataclass(frozen=True)
class Size:
    hours: int
    events_per_second: float

    @property
    def events(self) -> int:
        return self.hours * int(self.events_per_second * 3600)


SIZES = {"demo": Size(3, 2.0), "300k": Size(1, 83.4), "1M": Size(1, 278.0)}


def log(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", flush=True)


# The data: generated once per size, put into each run's lakehouse


def prepare(label: str, work: Path):
    """The size's landing files (generated once) and their oracle."""
    from lakehouse.config import Lakehouse
    from lakehouse_tools.generator import write_campaigns, write_hours
    from lakehouse_tools.oracle import expected_from_landing

    size = SIZES[label]
    data = Lakehouse(root=str(work / f"data-{label}"))
    started = time.perf_counter()
    write_campaigns(data, SEED)
    manifests = write_hours(data, DEMO_START, size.hours, size.events_per_second, SEED)
    lines = sum(m.lines for m in manifests)
    log(
        f"data {label}: {lines} lines in {size.hours} hour(s), {time.perf_counter() - started:.1f} s"
    )
    started = time.perf_counter()
    expected = expected_from_landing(data.landing_events, data.landing_campaigns)
    log(
        f"oracle {label}: {len(expected.events)} valid events, "
        f"{sum(expected.quarantined.values())} quarantined, {time.perf_counter() - started:.1f} s"
    )
    return data, expected, lines


def land(data, lakehouse) -> int:
    """Put the size's landing files into ``lakehouse`` (a local copy, or one PUT per file): bytes."""
    from lakehouse.files import lake_path, write_atomic

    source = Path(data.root) / "landing"
    total = 0
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        text = path.read_text()
        write_atomic(
            lake_path(f"{lakehouse.root}/landing") / path.relative_to(source).as_posix(), text
        )
        total += len(text)
    return total


# Servers of the benchmark's own, per storage


@contextmanager
def environment(values: dict[str, str]):
    """``os.environ`` with ``values`` set, restored after (the lakehouse's bucket clients dropped)."""
    from lakehouse import files

    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    files._bucket_store.cache_clear()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        files._bucket_store.cache_clear()


def _child_running(script: str) -> int | None:
    """The pid of this process's child whose command line names ``script`` (the server it started)."""
    for pid, (parent, _) in proc_stats().items():
        if parent == os.getpid():
            try:
                if script in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                    return pid
            except OSError:
                continue
    return None


@dataclass
class Servers:
    storage: str
    engine_pid: int
    server_pid: int | None = None
    settings: dict | None = None
    engine_start_s: float = 0.0

    def requests(self) -> dict:
        if not self.settings:
            return {}
        from helpers import s3_requests

        return s3_requests(self.settings)


@contextmanager
def servers(storage: str, work: Path):
    """For ``s3`` a private S3 server, then (both) a private engine for the storage's root."""
    from helpers import private_engine
    from s3_server import running_s3_server

    state = work / "servers" / storage
    shutil.rmtree(state, ignore_errors=True)
    (state / "s3").mkdir(parents=True)
    with environment({"LAKEHOUSE_METASTORE": "none", "LAKEHOUSE_ENGINE": "connect"}):
        if storage == S3:
            with running_s3_server(state / "s3") as settings:
                server_pid = _child_running("include/s3/server.py")
                with environment({**settings, "LAKEHOUSE_ROOT": f"s3a://{BUCKET}/engine"}):
                    with _engine(state, private_engine) as (pid, seconds):
                        yield Servers(storage, pid, server_pid, settings, seconds)
        else:
            with environment({"LAKEHOUSE_ROOT": str(work / "runs" / "engine")}):
                with _engine(state, private_engine) as (pid, seconds):
                    yield Servers(storage, pid, engine_start_s=seconds)


@contextmanager
def _engine(state: Path, private_engine):
    started = time.perf_counter()
    with private_engine(state / "engine", os.environ.__setitem__):
        seconds = time.perf_counter() - started
        pid = int((state / "engine" / "supervisor.pid").read_text())
        log(f"engine: up in {seconds:.1f} s (process group {pid})")
        yield pid, seconds
    log("engine: stopped")


class TreeSampler:
    """CPU seconds of a process tree over an interval, sampled per process every ``period`` s.

    A process that ends during the interval counts up to its last sample (the engine's Python
    workers are reaped by nobody who would count them: their daemon ignores SIGCHLD).
    """

    def __init__(self, root: int, period: float = 0.5):
        self.root, self.period = root, period
        self.first: dict[int, float] = self._tree()
        self.last: dict[int, float] = dict(self.first)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> dict[int, float]:
        stats = proc_stats()
        children: dict[int, list[int]] = {}
        for pid, (parent, _) in stats.items():
            children.setdefault(parent, []).append(pid)
        found, todo = {}, [self.root]
        while todo:
            pid = todo.pop()
            if pid in stats:
                found[pid] = stats[pid][1]
            todo += children.get(pid, [])
        return found

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.last.update(self._tree())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        self.last.update(self._tree())
        return sum(cpu - self.first.get(pid, 0.0) for pid, cpu in self.last.items())


# One run: the client process, measured


def run_client(servers: Servers, root: str, work: Path, name: str) -> dict:
    """Every task in one client process (``worker``): its figures, and its step lines as they come."""
    spec = work / "specs" / f"{name}.json"
    spec.parent.mkdir(parents=True, exist_ok=True)
    out = spec.with_suffix(".out.json")
    spec.write_text(
        json.dumps(
            {
                "root": root,
                "engine_pid": servers.engine_pid,
                "s3": servers.settings,
                "out": str(out),
            }
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": f"{PROJECT_DIR / 'tests'}:{PROJECT_DIR / 'include'}:{PROJECT_DIR}",
    }
    requests_before = servers.requests()
    server_before = tree_cpu(servers.server_pid) if servers.server_pid else 0.0
    sampler = TreeSampler(servers.engine_pid)
    cpu_before, started = children_cpu(), time.perf_counter()
    log_path = spec.with_suffix(".log")
    with open(log_path, "w") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.storage_compare", "worker", str(spec)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        for line in process.stdout:
            log_file.write(line)
            if line.startswith("step "):
                print(f"  {name}: {line[5:].rstrip()}", flush=True)
        code = process.wait()
    wall = time.perf_counter() - started
    client_cpu = children_cpu() - cpu_before
    engine_cpu = sampler.stop()
    server_cpu = (tree_cpu(servers.server_pid) - server_before) if servers.server_pid else None
    requests_after = servers.requests()
    if code != 0:
        tail = "".join(log_path.read_text().splitlines(keepends=True)[-40:])
        raise RuntimeError(f"{name}: the pipeline failed ({code}); {log_path}:\n{tail}")
    result = json.loads(out.read_text())
    requests = {
        kind: requests_after.get(kind, 0) - requests_before.get(kind, 0)
        for kind in sorted(set(requests_after) | set(requests_before))
    }
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(client_cpu + engine_cpu, 1),
        "client_cpu_s": round(client_cpu, 1),
        "engine_cpu_s": round(engine_cpu, 1),
        "server_cpu_s": None if server_cpu is None else round(server_cpu, 1),
        "requests": {k: v for k, v in requests.items() if v} if servers.settings else None,
        "tasks": result["tasks"],
    }


def worker(spec_path: str) -> None:
    """``worker SPEC.json``: every task of the catalog in DAG order, a ``step`` line per task."""
    from helpers import run_job

    from lakehouse import catalog
    from lakehouse.config import Lakehouse

    spec = json.loads(Path(spec_path).read_text())
    lakehouse = Lakehouse(root=spec["root"])
    tasks = {}
    for entry in catalog.tasks():
        requests_before = _requests(spec["s3"])
        engine_before, started = tree_cpu(spec["engine_pid"]), time.perf_counter()
        summary = run_job(entry.task, lakehouse) or {}
        seconds = time.perf_counter() - started
        engine = tree_cpu(spec["engine_pid"]) - engine_before
        requests = _requests(spec["s3"])
        rows = {k: summary[k] for k in ROW_KEYS if isinstance(summary.get(k), int)}
        figures = {"wall_s": round(seconds, 1), "engine_cpu_s": round(engine, 1), "rows": rows}
        if spec["s3"]:
            figures["requests"] = sum(requests.values()) - sum(requests_before.values())
        tasks[entry.task] = figures
        shown = ", ".join(f"{k}={v}" for k, v in rows.items()) or "no row counts"
        extra = f", {figures['requests']} S3 requests" if spec["s3"] else ""
        print(
            f"step {entry.task:<22} {seconds:6.1f} s  engine {engine:5.1f} CPU-s  {shown}{extra}",
            flush=True,
        )
    Path(spec["out"]).write_text(json.dumps({"tasks": tasks}))


def _requests(settings: dict | None) -> dict:
    if not settings:
        return {}
    from helpers import s3_requests

    return {k: v for k, v in s3_requests(settings).items() if k.isupper()}  # methods only


# The check: every table read back through the engine


def check(lakehouse, expected, name: str) -> tuple[dict, list[str]]:
    """Bronze, silver, the quarantine and gold equal the oracle (else AssertionError); rows per table
    and the tables the run did not write."""
    from helpers import assert_tables_match_oracle

    from lakehouse import catalog, delta_log
    from lakehouse.spark import build_spark_session

    started = time.perf_counter()
    spark = build_spark_session("bench-storage-check", engine_kind="connect", outlives_jobs=True)
    try:
        assert_tables_match_oracle(spark, lakehouse, expected)
        rows, unwritten = {}, []
        for table in catalog.tables():
            path = lakehouse.table(table.name).path
            if delta_log.is_delta_table(path):
                rows[table.name] = spark.read.format("delta").load(path).count()
            else:
                unwritten.append(table.name)
    finally:
        spark.stop()
    gold = sum(v for k, v in rows.items() if k.startswith("gold."))
    log(
        f"  {name}: every table = oracle ({rows.get('silver.ad_events')} silver rows, {gold} gold rows), "
        f"checked in {time.perf_counter() - started:.1f} s"
    )
    for table in unwritten:
        log(f"  {name}: not written by the hourly run: {table}")
    return rows, unwritten


def measure(options) -> dict:
    from bench.harness import declared_tables
    from lakehouse.config import Lakehouse

    work = Path(options.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    labels = options.sizes.split(",")
    storages = options.storages.split(",")
    results = {
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M}Z",
        "command": "python -m bench.storage_compare " + " ".join(options.argv),
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "catalog": declared_tables(),
        "sizes": {},
        "engines": {},
    }
    data = {}
    for label in labels:
        lakehouse, expected, lines = prepare(label, work)
        data[label] = (lakehouse, expected)
        size = SIZES[label]
        results["sizes"][label] = {
            "hours": size.hours,
            "events_per_second": size.events_per_second,
            "events": size.events,
            "lines": lines,
            "valid_events": len(expected.events),
            "runs": {},
        }
    for storage in storages:
        log(f"{storage}: starting its servers")
        with servers(storage, work) as running:
            results["engines"][storage] = {"start_s": round(running.engine_start_s, 1)}
            for label in labels:
                for rep in range(options.reps):
                    name = f"{storage} {label} rep {rep + 1}"
                    token = secrets.token_hex(3)
                    if storage == S3:
                        root = f"s3a://{BUCKET}/bench-{label}-{rep + 1}-{token}"
                    else:
                        root = str(work / "runs" / f"{label}-{rep + 1}-{token}")
                    lakehouse = Lakehouse(root=root)
                    started = time.perf_counter()
                    landed = land(data[label][0], lakehouse)
                    log(
                        f"{name}: {landed / 1e6:.1f} MB landed in {root}, {time.perf_counter() - started:.1f} s"
                    )
                    run = run_client(running, root, work, f"{storage}-{label}-{rep + 1}")
                    requests = run["requests"]
                    log(
                        f"{name}: {run['cpu_s']} CPU-s (engine {run['engine_cpu_s']}, client "
                        f"{run['client_cpu_s']}), {run['wall_s']} s wall"
                        + (f", {_total(requests)} S3 requests {requests}" if requests else "")
                    )
                    try:
                        rows, unwritten = check(lakehouse, data[label][1], name)
                    except AssertionError as error:
                        raise SystemExit(
                            f"{name}: the tables differ from the oracle: {error}"
                        ) from error
                    run.update(oracle_equal=True, table_rows=rows, unwritten=unwritten)
                    runs = results["sizes"][label]["runs"].setdefault(storage, [])
                    runs.append(run)
                    if storage == LOCAL:
                        shutil.rmtree(root, ignore_errors=True)
    results["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return results


# The section


def _median(values: list) -> float:
    return round(statistics.median(values), 1)


def _spread(values: list) -> str:
    median = _median(values)
    return f"{median}" if len(values) == 1 else f"{median} ({min(values)}–{max(values)})"


def _median_requests(runs: list[dict]) -> dict:
    """Median requests per kind over the runs (S3 only)."""
    kinds = sorted({k for run in runs for k in (run.get("requests") or {})})
    return {
        k: round(statistics.median([(r.get("requests") or {}).get(k, 0) for r in runs]))
        for k in kinds
    }


def _total(kinds: dict) -> int:
    """Requests of every method (the conditional creates are PUTs, counted once)."""
    return sum(v for k, v in kinds.items() if k.isupper())


def summary_figures(results: dict) -> dict:
    figures = {}
    for label, size in results["sizes"].items():
        key = label.lower()
        runs = size["runs"]
        for storage, measured in runs.items():
            figures[f"storage_{key}_{storage}_cpu_s"] = _median([r["cpu_s"] for r in measured])
            figures[f"storage_{key}_{storage}_wall_s"] = _median([r["wall_s"] for r in measured])
        if S3 in runs:
            figures[f"storage_{key}_s3_requests"] = _total(_median_requests(runs[S3]))
        if S3 in runs and LOCAL in runs:
            for what in ("cpu_s", "wall_s"):
                ratio = _median([r[what] for r in runs[S3]]) / _median(
                    [r[what] for r in runs[LOCAL]]
                )
                figures[f"storage_{key}_s3_to_local_{what.removesuffix('_s')}_ratio"] = round(
                    ratio, 2
                )
    return figures


REQUEST_KINDS = ("GET", "HEAD", "PUT", "POST", "DELETE", "put-if-absent", "precondition-failed")


def _load(average: list | None) -> str:
    return ", ".join(f"{x:.1f}" for x in average or [])


def render(results: dict) -> str:
    """The section: per size and storage CPU-s, wall, S3 requests by kind; the tasks side by side."""
    begin, end = markers("bench/storage_compare.py")
    lines = [
        begin,
        "; ".join(
            f"`{run['command'].replace(f'{PROJECT_DIR}/', '')}` ({', '.join(run.get('sizes', []))}{': ' if run.get('sizes') else ''}"
            f"{run['date']}, load average {_load(run.get('load_before'))} before, "
            f"{_load(run.get('load_after'))} after)"
            for run in results.get("runs", [results])
        )
        + ". 2 cores shared with other work.",
        "",
        "The whole hourly run (every task the catalog declares, in DAG order, in one client of the "
        "engine: what run_pipeline and the DAG run) into a fresh lakehouse on each storage: local disk, "
        "and a local S3-compatible server (versitygw's posix gateway behind include/s3/server.py, "
        "objects as files on local disk, on this machine: no network latency, so what S3 adds here is requests and their handling, "
        "not distance). Each storage has an engine of its own started for it (S3: with the S3A jars); "
        "no table-name metastore on either. CPU-s: the client process plus the engine's whole tree "
        "(JVM and its Python workers, /proc sampled every 0.5 s); the S3 server's own CPU is shown "
        "apart. Requests: the server's counts by method before and after the run (put-if-absent: the "
        "conditional creates of Delta commits and leases, also counted under PUT). Every run's "
        "bronze, silver, quarantine and gold tables equal the oracle's (a run that does not fails the "
        "benchmark).",
        "",
        "| data | storage | CPU-s | engine | client | wall s | × local CPU | × local wall "
        "| S3 requests | S3 server CPU-s | = oracle |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    unwritten = set()
    for label, size in results["sizes"].items():
        runs = size["runs"]
        base = runs.get(LOCAL)
        described = f"{label} ({size['events']:,} events, {size['hours']} h)"
        for storage, measured in runs.items():
            cpu = [r["cpu_s"] for r in measured]
            wall = [r["wall_s"] for r in measured]
            ratio_cpu = ratio_wall = ""
            if base and storage != LOCAL:
                ratio_cpu = f"{_median(cpu) / _median([r['cpu_s'] for r in base]):.2f}"
                ratio_wall = f"{_median(wall) / _median([r['wall_s'] for r in base]):.2f}"
            requests = _total(_median_requests(measured)) if storage == S3 else ""
            server = _median([r["server_cpu_s"] for r in measured]) if storage == S3 else ""
            equal = "yes" if all(r.get("oracle_equal") for r in measured) else "NO"
            lines.append(
                f"| {described} | {storage} | {_spread(cpu)} | "
                f"{_median([r['engine_cpu_s'] for r in measured])} | "
                f"{_median([r['client_cpu_s'] for r in measured])} | {_spread(wall)} | {ratio_cpu} | "
                f"{ratio_wall} | {requests} | {server} | {equal} |"
            )
            for run in measured:
                unwritten |= set(run.get("unwritten", []))
    lines += ["", "S3 requests by kind (median of the runs):", ""]
    lines += [
        "| data | " + " | ".join(REQUEST_KINDS) + " |",
        "| --- | " + " | ".join("---:" for _ in REQUEST_KINDS) + " |",
    ]
    for label, size in results["sizes"].items():
        if S3 in size["runs"]:
            kinds = _median_requests(size["runs"][S3])
            lines.append(
                f"| {label} | " + " | ".join(str(kinds.get(k, 0)) for k in REQUEST_KINDS) + " |"
            )
    for label, size in results["sizes"].items():
        runs = size["runs"]
        if not (S3 in runs and LOCAL in runs):
            continue
        local, s3 = runs[LOCAL][0]["tasks"], runs[S3][0]["tasks"]
        lines += [
            "",
            f"Per task, {label} (first repetition): wall seconds and the engine's CPU-s on each storage "
            "(the engine's tree before and after the task), S3 requests."
            + (
                " Its first task also pays for the fresh engine's first queries (class loading, "
                "JIT) on either storage."
                if label == next(iter(results["sizes"]))
                else ""
            ),
            "",
            "| task | local s | S3 s | × | local engine CPU-s | S3 engine CPU-s | S3 requests |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for task, figures in s3.items():
            here = local.get(task, {})
            ratio = f"{figures['wall_s'] / here['wall_s']:.1f}" if here.get("wall_s") else ""
            lines.append(
                f"| {task} | {here.get('wall_s', '')} | {figures['wall_s']} | {ratio} | "
                f"{here.get('engine_cpu_s', '')} | {figures['engine_cpu_s']} | {figures.get('requests', '')} |"
            )
    engines = results.get("engines", {})
    if engines:
        lines += [
            "",
            "Engine start (untimed in the runs): "
            + ", ".join(f"{storage} {e['start_s']} s" for storage, e in engines.items())
            + ".",
        ]
    if unwritten:
        lines += [
            "",
            "Left out (no task of the hourly run writes it; `ops.table_maintenance` is the "
            "maintenance job's, DAG ysb_maintenance): "
            + ", ".join(f"`{name}`" for name in sorted(unwritten))
            + ".",
        ]
    if results.get("note"):
        lines += ["", results["note"]]
    lines += ["", end, ""]
    return "\n".join(lines)


def merged(earlier: dict, later: dict) -> dict:
    """An earlier run's sizes beside a later one's (a size measured in both: the later's); every run's
    command, date and load kept under ``runs``."""
    earlier = earlier.get("results", earlier)
    runs = [
        {k: v for k, v in run.items() if k in ("command", "date", "load_before", "load_after")}
        | {"sizes": list(run["sizes"])}
        for run in (*earlier.get("runs", [earlier]), later)
    ]
    return {
        **later,
        "sizes": {**earlier["sizes"], **later["sizes"]},
        "engines": {**earlier.get("engines", {}), **later.get("engines", {})},
        "runs": runs,
    }


def main(argv: list[str]) -> None:
    from bench.render import publish

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="demo,1M", help=f"comma-separated, of {list(SIZES)}")
    parser.add_argument("--storages", default=f"{LOCAL},{S3}")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--work-dir", default=str(WORK))
    parser.add_argument("--note", help="a paragraph about this run for the section")
    parser.add_argument("--results", help="also write the figures as JSON here")
    parser.add_argument("--out", help="render that Markdown file (BENCHMARKS.md) from the results")
    parser.add_argument("--summary", help="update this benchmark's keys in that JSON file")
    parser.add_argument(
        "--merge",
        metavar="RESULTS",
        help="keep the sizes of an earlier run's saved results beside this run's (its command kept)",
    )
    parser.add_argument(
        "--render", metavar="RESULTS", help="measure nothing: publish these saved results"
    )
    options = parser.parse_args(argv)
    options.argv = argv
    if options.render:
        saved = json.loads(Path(options.render).read_text())
        results = saved.get("results", saved)
        if options.note:
            results["note"] = options.note
    else:
        results = measure(options)
        if options.merge:
            results = merged(json.loads(Path(options.merge).read_text()), results)
        if options.note:
            results["note"] = options.note
    if options.results:
        Path(options.results).write_text(json.dumps(results, indent=1) + "\n")
    publish(
        render(results),
        options.out,
        options.summary,
        summary_figures(results),
        benchmark="storage_compare",
        results=results,
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker(sys.argv[2])
    else:
        main(sys.argv[1:])
