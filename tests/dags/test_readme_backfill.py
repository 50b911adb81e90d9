"""The README's backfill example, run as printed after `make demo`: it creates exactly the runs it promises."""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow_env import airflow, airflow_environment, airflow_python, migrate

from lakehouse.config import Lakehouse
from lakehouse_tools.demo import DEMO_START

README = Path(__file__).resolve().parents[2] / "README.md"
DEMO_RUN = DEMO_START + timedelta(
    hours=3
)  # `make demo` runs `airflow dags test` at the end of its 3 hours

# What `make demo` leaves in the metadata DB: one successful run of ysb_hourly at its logical date.
DEMO_LEFT = """
from airflow.models.dagrun import DagRun
from airflow.utils.session import create_session
from airflow.utils.state import DagRunState
with create_session() as session:
    for run in session.query(DagRun).filter(DagRun.dag_id == "ysb_hourly"):
        run.state = DagRunState.SUCCESS
"""

BACKFILL_RUNS = """
import json
from airflow.models.dagrun import DagRun
from airflow.utils.session import create_session
with create_session() as session:
    runs = session.query(DagRun).filter(DagRun.dag_id == "ysb_hourly", DagRun.run_type == "backfill")
    print(json.dumps(sorted(run.logical_date.isoformat() for run in runs)))
"""


def readme_backfill_commands() -> list[list[str]]:
    """The `airflow backfill create` commands of the README's example ("So to recompute event hours ...")."""
    text = README.read_text()
    block = re.search(r"So to recompute event hours.*?```bash\n(.*?)```", text, re.S)
    assert block, "README.md: the backfill example ('So to recompute event hours ...') is gone"
    joined = block[1].replace("\\\n", " ")
    return [
        shlex.split(line)[1:]
        for line in joined.splitlines()
        if line.startswith("airflow backfill create")
    ]  # without "airflow"


def test_the_readme_backfill_after_make_demo_runs_every_hour_it_names(tmp_path):
    dry_run, create = readme_backfill_commands()
    assert "--dry-run" in dry_run and "--dry-run" not in create
    home = tmp_path / "airflow_home"
    home.mkdir()
    migrate(home)
    env = airflow_environment(home, Lakehouse(str(tmp_path / "lakehouse")))
    assert airflow(env, "dags", "reserialize").returncode == 0
    made = airflow(env, "dags", "trigger", "ysb_hourly", "--logical-date", DEMO_RUN.isoformat())
    assert made.returncode == 0, made.stderr[-3000:]
    airflow_python(env, DEMO_LEFT)

    promised = [
        datetime(2026, 11, 20, hour, tzinfo=UTC) for hour in (1, 2, 3)
    ]  # event hours 00, 01 and 02
    assert DEMO_RUN in promised  # the case the README warns of: the demo's run is among them
    listed = airflow(env, *dry_run)
    assert listed.returncode == 0, listed.stderr[-3000:]
    attempted = listed.stdout.split("Runs to be attempted")[-1]
    assert re.findall(r"2026-11-20 \d\d:00:00\+00:00", attempted) == [
        f"{h:%Y-%m-%d %H:%M:%S+00:00}" for h in promised
    ], listed.stdout

    created = airflow(env, *create)  # no scheduler runs: the runs are created, not executed
    assert created.returncode == 0, created.stdout[-3000:] + created.stderr[-3000:]
    runs = airflow_python(env, BACKFILL_RUNS)
    assert runs == [h.isoformat() for h in promised]


# The run the README's named trigger made: its type and its params.
NAMED_RUN = """
import json
from airflow.models.dagrun import DagRun
from airflow.utils.session import create_session
with create_session() as session:
    run = session.query(DagRun).filter(DagRun.dag_id == "ysb_hourly", DagRun.run_id == sys.argv[1]).one()
    print(json.dumps([str(run.run_type), run.conf]))
"""


def test_the_readme_names_a_manual_batch_run_after_its_hours(tmp_path):
    block = re.search(
        r"Name a manual run after its hours.*?```bash\n(.*?)```", README.read_text(), re.S
    )
    assert block, "README.md: the named manual run ('Name a manual run after its hours') is gone"
    trigger = shlex.split(block[1].replace("\\\n", " "))[1:]  # without "airflow"
    run_id = trigger[trigger.index("--run-id") + 1]
    home = tmp_path / "airflow_home"
    home.mkdir()
    migrate(home)
    env = airflow_environment(home, Lakehouse(str(tmp_path / "lakehouse")))
    assert airflow(env, "dags", "reserialize").returncode == 0
    made = airflow(env, *trigger)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    run_type, conf = airflow_python(env, NAMED_RUN.replace("sys.argv[1]", repr(run_id)))
    assert run_type.lower().endswith("manual") and run_id == "batch__2026-11-20T00-03"
    assert conf == {"mode": "batch", "start": "2026-11-20T00:00Z", "end": "2026-11-20T03:00Z"}
