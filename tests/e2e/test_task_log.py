"""A task's log, as a real Airflow writes it: the project's summary leads, the job's progress folded above it."""

from __future__ import annotations

import re
from datetime import timedelta

from airflow_env import airflow, airflow_environment
from helpers import START, oracle

from lakehouse_airflow.operators import PROGRESS_GROUP
from lakehouse_tools.demo import task_outputs
from lakehouse_tools.generator import write_campaigns, write_hours

# A structlog console line: time, [level], the message, [logger], then key=value pairs.
LOG_LINE = re.compile(r"^\S+ \[\w+\s*\] (?P<message>.*?)\s+\[[\w.]+\](?: \S+=.*)?$")


def messages(task_log: str) -> list[str]:
    return [m["message"] for line in task_log.splitlines() if (m := LOG_LINE.match(line))]


def folded(lines: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(what the UI shows unfolded, each group's lines by title) of a task's log after Airflow's
    "Pre Execute" group (whose end is the task's first line of its own)."""
    lines = lines[lines.index("::endgroup::") + 1 :]
    shown, groups, current = [], {}, None
    for line in lines:
        if line.startswith("::group::"):
            current = line.removeprefix("::group::")
            groups[current] = []
        elif line == "::endgroup::":
            current = None
        elif current is None:
            shown.append(line)
        else:
            groups[current].append(line)
    return shown, groups


def test_a_tasks_log_leads_with_the_projects_summary_and_folds_its_progress(
    lakehouse, airflow_home
):
    write_campaigns(lakehouse, seed=21)
    write_hours(lakehouse, START, 1, events_per_second=0.05, seed=21)
    lines = oracle(lakehouse).lines
    env = airflow_environment(airflow_home, lakehouse)

    done = airflow(
        env,
        "tasks",
        "test",
        "ysb_hourly",
        "bronze_ad_events",
        (START + timedelta(hours=1)).isoformat(),
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]

    shown, groups = folded(messages(task_outputs(output)["bronze_ad_events"]))
    assert shown[:4] == [
        f"bronze.ad_events: {lines:,} row(s) in, 1 micro-batch(es)",
        f"  wrote bronze.ad_events: {lines:,} row(s)",
        "  wrote ops.query_progress: 1 row(s)",
        shown[3],
    ] and re.fullmatch(r"  \d+\.\d s", shown[3]), shown
    # While it ran: a line per micro-batch as it finished, with its rows and seconds.
    progress = groups[f"bronze_ad_events: {PROGRESS_GROUP}"]
    assert [
        re.sub(r"in \d+\.\d s$", "in <s> s", line) for line in progress if "micro-batch 0" in line
    ] == [f"bronze.ad_events: micro-batch 0 done: {lines:,} row(s) in <s> s"], progress
