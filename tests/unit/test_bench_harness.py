"""The benchmark harness (bench/harness.py): medians, the process-tree CPU timer, the results files.

No Spark: a busy child process stands in for a job.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from bench import harness

BUSY = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\n"


def test_medians_and_the_alternating_order():
    assert harness.stats([3.0, None, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert harness.stats([None])["median"] is None
    assert harness.median([1.0, 4.0]) == 2.5
    assert harness.alternating(["a", "b", "c"], 0) == ["a", "b", "c"]
    assert harness.alternating(["a", "b", "c"], 1) == ["c", "b", "a"]
    assert harness.parse_size("1M") == 1_000_000 and harness.parse_size("20k") == 20_000
    assert harness.size_label(5_000_000) == "5M" and harness.size_label(2_000) == "2k"
    assert harness.cell([3.0, 1.0, 2.0]) == "2.0 (1.0–3.0)"
    assert harness.cell([1.25], digits=2) == "1.25" and harness.cell([]) == "–"


def test_a_command_s_cpu_covers_the_grandchild_it_leaves_behind(tmp_path):
    harness.become_subreaper()
    # The child starts a grandchild that outlives it: its CPU still counts.
    orphan = f"import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', {BUSY.format(seconds=0.6)!r}])\n"
    code, wall, cpu = harness.run_tree(
        [sys.executable, "-c", orphan], dict(os.environ), tmp_path / "log", timeout=60
    )
    assert code == 0 and wall < 5
    assert cpu >= 0.55


def test_a_command_s_end_waits_for_its_own_processes_only(tmp_path):
    harness.become_subreaper()
    # A child of this process outside the command (a test's engine, say): neither waited for nor killed.
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = time.monotonic()
        code, _, _ = harness.run_tree(
            [sys.executable, "-c", "pass"], dict(os.environ), tmp_path / "log", timeout=60
        )
        assert code == 0 and time.monotonic() - started < 10
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_a_live_process_tree_s_cpu():
    child = subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=0.5) + "time.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        while harness.tree_cpu(child.pid) < 0.45 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert harness.tree_cpu(child.pid) >= 0.45
        assert harness.tree_cpu(os.getpid()) >= harness.tree_cpu(child.pid)
        assert harness.tree_cpu(child.pid, include_root=False) == 0
    finally:
        child.kill()
        child.wait()


def test_a_process_gone_between_two_readings_subtracts_nothing():
    before = {1: 10.0, 2: 50.0}  # pid 2, a worker, exits after the first reading
    assert harness.cpu_between(before, {1: 12.5, 3: 0.5}) == 3.0


def test_a_block_s_cpu_and_wall_in_this_process_tree():
    with harness.timed() as took:
        subprocess.run([sys.executable, "-c", BUSY.format(seconds=0.4)], check=True)
        end = time.process_time() + 0.2
        while time.process_time() < end:
            pass
    # The child was reaped inside the block: its CPU is in this process's cutime.
    assert took["cpu_s"] >= 0.55 and took["wall_s"] >= 0.55


def test_results_keep_every_other_scenario_s_summary_keys(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"other_key": 1}))
    path = harness.save_results(
        "small_hour", tmp_path, figures={"small_hour_cpu_s": 14.2}, catalog=[], per_table=False
    )
    saved = json.loads(path.read_text())
    assert saved["summary_keys"] == ["small_hour_cpu_s"] and saved["renderer"] == "bench.small_hour"
    assert saved["figures"] == {"small_hour_cpu_s": 14.2} and saved["per_table"] is False
    assert json.loads((tmp_path / "summary.json").read_text()) == {
        "other_key": 1,
        "small_hour_cpu_s": 14.2,
    }
    assert harness.free_port() > 0
