"""Bronze's Python checks per run against the landing zone's history: short and a year long.

Usage (from the repository, after ``make setup``; no Spark):
    python -m bench.landing_history [--hours 9,8760] [--baseline 07870b4] [--out BENCHMARKS.md]

A synthetic landing zone of ``hours`` hour folders at 4 tiny files an hour (9 hours: 36 files; a
year: 8,760 hours, 35,040 files), every file already read by bronze's file source (its log as
Spark writes it: one file per batch, every tenth a compaction of all before). Then two hourly runs,
each landing one new hour: the Python checks of a bronze run (plan, new bytes, caught up, and the
landing report after the batch) are timed on the second, the first recording the history. Each
code version runs in its own process (``--baseline``: ``include/`` at that commit, exported);
reported: CPU seconds of the checks, and the bytes per run that bronze's records and the source
log grow by.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[1]
WORK = PROJECT_DIR / ".local" / "bench" / "landing_history"
FILES_PER_HOUR = 4
START = datetime(2025, 1, 1)


def land(landing: Path, hours: range) -> list[Path]:
    """Tiny files in ``<date>/<hour>/`` folders (one line each: the checks never parse them)."""
    landed = []
    for n in hours:
        folder = landing / f"{START + timedelta(hours=n):%Y-%m-%d/%H}"
        folder.mkdir(parents=True, exist_ok=True)
        for part in range(FILES_PER_HOUR):
            path = folder / f"part-{part}.jsonl"
            path.write_text(json.dumps({"hour": n, "part": part}) + "\n")
            landed.append(path)
    return landed


def read_batch(checkpoint: Path, batch: int, files: list[Path], history: list[str]) -> None:
    """Batch ``batch`` of the file source read ``files``: its log entry, offsets and commit."""
    from lakehouse.landing import spark_uri

    for folder in ("offsets", "commits", "sources/0"):
        (checkpoint / folder).mkdir(parents=True, exist_ok=True)
    entries = [
        json.dumps(
            {"path": spark_uri(f), "timestamp": f.stat().st_mtime_ns // 10**6, "batchId": batch}
        )
        for f in files
    ]
    history += entries
    log = checkpoint / "sources" / "0"
    if (batch + 1) % 10 == 0:
        (log / f"{batch}.compact").write_text("v1\n" + "\n".join(history) + "\n")
    else:
        (log / str(batch)).write_text("v1\n" + "\n".join(entries) + "\n")
    (checkpoint / "offsets" / str(batch)).write_text(f'v1\n{{}}\n{{"logOffset":{batch}}}\n')
    (checkpoint / "commits" / str(batch)).write_text("v1\n{}\n")
    # As Spark: the newest 100 batches' offsets and commits kept (minBatchesToRetain), and the
    # source log files before a compaction deleted once it holds them.
    for log_name in ("offsets", "commits"):
        (checkpoint / log_name / str(batch - 100)).unlink(missing_ok=True)
    if (batch + 1) % 10 == 0:
        for folded in range(max(batch - 10, 0), batch):
            (log / str(folded)).unlink(missing_ok=True)
            (log / f"{folded}.compact").unlink(missing_ok=True)


def size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def bytes_read() -> int:
    """Bytes this process has read so far (``rchar`` of /proc/self/io: files, the page cache too)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def records_bytes(checkpoint: Path) -> int:
    """Bronze's records of the files it read: the JSON manifest of before, or the index now."""
    return size_of(Path(f"{checkpoint}.landed_files.json")) + size_of(
        Path(f"{checkpoint}.landed_files")
    )


def bronze_checks(checkpoint: str, landing: str, after_batch) -> None:
    """What a bronze run computes in Python around its query, in either code version."""
    from lakehouse.flows import ingest

    plan = ingest._plan(checkpoint, landing)
    windowed = "plan" in inspect.signature(ingest._new_bytes).parameters
    ingest._new_bytes(checkpoint, plan if windowed else landing)
    ingest._caught_up(checkpoint, plan if windowed else landing)
    after_batch()
    if windowed:
        ingest.landing_problems(checkpoint, landing, None, plan)
    else:
        ingest.landing_problems(checkpoint, landing, None)


def measure(hours: int) -> dict:
    """One code version (this process's), one history: the second run's checks, timed."""
    from bench.harness import proc_stats

    root = WORK / f"h{hours}-{os.getpid()}"
    landing, checkpoint = root / "events", root / "gen=0"
    started = time.perf_counter()
    history: list[str] = []
    batch = 0
    for first in range(0, hours, 24):  # the history: a day a batch
        read_batch(checkpoint, batch, land(landing, range(first, min(first + 24, hours))), history)
        batch += 1
    built = time.perf_counter() - started
    files = hours * FILES_PER_HOUR  # the history, before the two runs
    figures = {}
    for run in ("record", "measured"):
        new = land(landing, range(hours, hours + 1))
        hours += 1
        records_before = records_bytes(checkpoint)
        log_before = size_of(checkpoint / "sources")
        cpu, read = proc_stats()[os.getpid()][1], bytes_read()

        def after_batch(new=new, batch=batch) -> None:
            read_batch(checkpoint, batch, new, history)

        bronze_checks(str(checkpoint), str(landing), after_batch)
        batch += 1
        figures[run] = {
            "cpu_s": round(proc_stats()[os.getpid()][1] - cpu, 3),
            "read_bytes": bytes_read() - read,
            "records_growth_bytes": records_bytes(checkpoint) - records_before,
            "source_log_growth_bytes": size_of(checkpoint / "sources") - log_before,
        }
    log_bytes = size_of(checkpoint / "sources")
    subprocess.run(["rm", "-rf", str(root)], check=True)
    return {
        "files": files,
        "history_built_s": round(built, 1),
        **figures["measured"],
        "records_bytes": records_before,
        "source_log_bytes": log_bytes,
    }


def run_version(include: Path, hours: int) -> dict:
    """:func:`measure` in a process whose ``lakehouse`` package is ``include``'s."""
    env = {**os.environ, "PYTHONPATH": f"{include}:{PROJECT_DIR}"}
    found = subprocess.run(
        [sys.executable, "-m", "bench.landing_history", "--measure", str(hours)],
        env=env,
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
    )
    if found.returncode:
        raise RuntimeError(found.stderr[-3000:])
    return json.loads(found.stdout.strip().splitlines()[-1])


def render(results: dict) -> str:
    lines = [
        "Bronze's Python checks of one hourly run (4 new files), after a history of landed files "
        "(4 an hour), every version in its own process, no Spark:",
        "",
        "| code | landed files before | checks, CPU-s | bytes read | bronze's records | records grow per "
        "run | source log | source log grows per run |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in results["rows"]:
        lines.append(
            f"| {row['code']} | {row['files']:,} | {row['cpu_s']:.3f} | {row['read_bytes']:,} | "
            f"{row['records_bytes']:,} B | {row['records_growth_bytes']:,} B | "
            f"{row['source_log_bytes']:,} B | {row['source_log_growth_bytes']:,} B |"
        )
    lines += [
        "",
        "Bytes read: what the checks' process read (`rchar`: bronze's records, the source log, "
        "landed files' heads). Bronze's records: the JSON manifest, read and parsed whole several "
        "times a run, before; now an index of small files by folder and by identity, of which a "
        "run reads the folders it lists (more bytes on disk, a few KB read). Their growth per run "
        "is the new hour's records, whatever the history. The source log is Spark's own "
        "(`sources/0`): a run adds its entries, and every tenth batch Spark rewrites every entry "
        "ever logged into one compaction (about 112 bytes per file ever read, the size shown) and "
        "reads it whole when a query starts; no file source option bounds it "
        "(docs/operations.md).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", default="9,8760", help="hours of history (4 files an hour)")
    parser.add_argument("--baseline", default="07870b4", help="the code before, a git revision")
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out")
    parser.add_argument("--summary")
    options = parser.parse_args(argv)
    if options.measure is not None:
        print(json.dumps(measure(options.measure)))
        return
    from bench.harness import code_snapshot
    from bench.render import publish

    commit, baseline = code_snapshot(WORK, options.baseline)
    rows = []
    for hours in (int(h) for h in options.hours.split(",")):
        for code, include in ((f"before ({commit})", baseline), ("now", PROJECT_DIR / "include")):
            row = {"code": code, "hours": hours, **run_version(include, hours)}
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    results = {"rows": rows}
    year = [r for r in rows if r["code"] == "now"]
    before = [r for r in rows if r["code"] != "now"]
    figures = {
        "landing_checks_cpu_s_short_history": year[0]["cpu_s"],
        "landing_checks_cpu_s_year_history": year[-1]["cpu_s"],
        "landing_checks_cpu_s_year_history_before": before[-1]["cpu_s"],
    }
    publish(
        render(results),
        options.out,
        options.summary,
        figures,
        benchmark="landing_history",
        results=results,
        per_table=False,
    )


if __name__ == "__main__":
    main()
