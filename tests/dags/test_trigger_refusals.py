"""Bad trigger values are refused before a run exists where a param's schema can see them, else by
preflight in one sentence; an interval over 31 days waits for confirm_long_interval.

Airflow validates each param against its own JSON schema when a run is created (the trigger
form and the REST API alike: ``SerializedDAG.create_dagrun``), so a malformed ``start`` or ``end``
is answered with a 400 and no run. A schema sees one param, never its siblings: a reversed range
or mode=batch without dates can only be refused by the first task.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"
GOOD = {"mode": "batch", "start": "2026-11-20T13:00Z", "end": "2026-11-20T16:00Z"}


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS_DIR)).dags["ysb_hourly"]


def interval_problems(params):
    """preflight's interval check of a manual run."""
    from lakehouse_airflow.preflight import interval_problems

    return interval_problems(params, "manual", None)


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-20T13:00Z",  # as the docs and the param's description write it
        "2026-11-20T13:00:00.000Z",  # as the trigger form's date picker sends it
        "2026-11-20T13:00:00Z",
        "2026-11-20T13:00+00:00",
        "2026-11-20T14:00+01:00",
        "2026-11-20T13:00",
    ],
)
def test_a_whole_hour_in_any_of_its_spellings_is_taken_by_the_schema_and_preflight(dag, value):
    """The schema refuses no start that preflight would take, nor takes one preflight refuses."""
    params = copy.deepcopy(dag.params)
    params.update({**GOOD, "start": value})
    validated = params.validate()
    assert validated["start"] == value
    assert interval_problems(validated) == []


@pytest.mark.parametrize(
    ("conf", "first_line"),
    [
        ({"start": "yesterday"}, "Invalid input for param start: 'yesterday' does not match"),
        ({"start": "2026-11-20T00:30Z"}, "Invalid input for param start: '2026-11-20T00:30Z'"),
        ({"end": "20.11.2026 14:00"}, "Invalid input for param end: '20.11.2026 14:00'"),
        ({"end": "2026-11-20T13:00:00+05:30"}, "Invalid input for param end: "),
        ({"confirm_long_interval": "yes"}, "Invalid input for param confirm_long_interval: 'yes'"),
    ],
    ids=["not-a-time", "half-past", "not-iso", "not-a-whole-utc-hour", "not-a-boolean"],
)
def test_a_malformed_value_is_refused_by_the_params_own_schema(dag, conf, first_line):
    """What the trigger form and the REST API check before they create a run; the refusal of a
    start or end says in words what to type, beside the pattern."""
    from airflow.sdk.definitions.param import ParamValidationError

    params = copy.deepcopy(dag.params)
    with pytest.raises(ParamValidationError) as refused:
        params.update({**GOOD, **conf})
    message = str(refused.value)
    assert message.startswith(first_line), message
    if {"start", "end"} & conf.keys():
        assert "a whole hour in UTC, e.g. 2026-11-20T13:00Z" in message, message


def test_airflows_trigger_path_creates_no_run_for_a_malformed_value(tmp_path):
    """Airflow's own trigger code (what `airflow dags trigger` and POST .../dagRuns call:
    ``create_dagrun`` of the serialized DAG) refuses a bad start, and no run exists."""
    from airflow_env import airflow, airflow_environment, airflow_python, dag_runs, migrate

    from lakehouse.config import Lakehouse

    home = tmp_path / "airflow_home"
    migrate(home)
    env = airflow_environment(home, Lakehouse(str(tmp_path / "lakehouse")))
    result = airflow(env, "dags", "reserialize")
    assert result.returncode == 0, result.stderr[-3000:]
    confs = [
        {**GOOD, "start": "yesterday"},
        {**GOOD, "start": "2026-11-20T00:30Z"},
        {**GOOD, "start": "2026-11-20T13:00:00.000Z"},  # the date picker's: taken
    ]
    outcomes = airflow_python(
        env,
        "import json\n"
        "from airflow.api.common.trigger_dag import trigger_dag\n"
        "from airflow.utils.types import DagRunTriggeredByType\n"
        "outcomes = []\n"
        f"for conf in {confs!r}:\n"
        "    try:\n"
        "        run = trigger_dag('ysb_hourly', conf=conf, triggered_by=DagRunTriggeredByType.REST_API)\n"
        "        outcomes.append(run.run_id)\n"
        "    except Exception as error:\n"
        "        outcomes.append(type(error).__name__ + ': ' + str(error).splitlines()[0])\n"
        "print(json.dumps(outcomes))\n",
    )
    assert outcomes[0].startswith(
        "ParamValidationError: Invalid input for param start: 'yesterday' does not match"
    ), outcomes
    assert outcomes[1].startswith(
        "ParamValidationError: Invalid input for param start: '2026-11-20T00:30Z' does not match"
    ), outcomes
    assert [run["run_id"] for run in dag_runs(env)] == [outcomes[2]], json.dumps(outcomes)


@pytest.mark.parametrize(
    ("conf", "refusal"),
    [
        (
            {"start": "2026-11-20T16:00Z", "end": "2026-11-20T13:00Z"},
            "Empty interval: end 2026-11-20T13:00:00+00:00 is not after start 2026-11-20T16:00:00+00:00",
        ),
        ({"start": None, "end": None}, "mode=batch needs the start and end params"),
        ({"end": None}, "mode=batch needs the start and end params"),
        ({"start": "2026-02-30T13:00Z"}, "Not an ISO-8601 time: '2026-02-30T13:00Z'"),
    ],
    ids=["reversed", "no-dates", "no-end", "no-such-day"],
)
def test_what_one_param_cannot_see_is_refused_by_preflight_in_one_sentence(dag, conf, refusal):
    params = copy.deepcopy(dag.params)
    params.update({**GOOD, **conf})
    problems = interval_problems(params.validate())  # the schemas let these through
    assert len(problems) == 1 and problems[0].startswith(refusal), problems
    assert "\n" not in problems[0]


def test_a_ten_year_batch_run_is_refused_at_once_with_its_hours_and_runs(dag):
    params = copy.deepcopy(dag.params)
    params.update({**GOOD, "start": "2016-11-20T00:00Z", "end": "2026-11-20T00:00Z"})
    began = time.process_time()
    problems = interval_problems(params.validate())
    assert time.process_time() - began < 5
    assert problems == [
        "mode=batch from 2016-11-20T00:00Z to 2026-11-20T00:00Z recomputes 87,648 hours "
        "(3,652 days) in 1 run, more than the 744 hours (31 days) a run recomputes unconfirmed "
        "(as a backfill: 87,648 runs, one per hour). Set confirm_long_interval=true to run it, "
        "or split it into intervals of 31 days or less."
    ]


def test_a_confirmed_long_interval_goes_and_says_what_it_will_do(dag):
    from lakehouse_airflow.preflight import run_plan

    params = copy.deepcopy(dag.params)
    params.update(
        {**GOOD, "start": "2016-11-20T00:00Z", "end": "2026-11-20T00:00Z"}
        | {"confirm_long_interval": True}
    )
    began = time.process_time()
    validated = params.validate()
    assert interval_problems(validated) == []
    plan = run_plan(validated, "manual", None)
    assert time.process_time() - began < 5
    assert plan == (
        "Batch run: recomputes 87648 hour(s) 2016-11-20T00:00Z..2026-11-19T23:00Z, end "
        "2026-11-20T00:00Z exclusive, in this one run (confirmed: confirm_long_interval)."
    )


def test_31_days_need_no_confirmation_and_a_backfill_run_is_never_asked(dag):
    from lakehouse.periods import parse_instant
    from lakehouse_airflow.preflight import interval_problems

    params = copy.deepcopy(dag.params)
    params.update({**GOOD, "start": "2026-10-01T00:00Z", "end": "2026-11-01T00:00Z"})
    assert interval_problems(params.validate(), "manual", None) == []
    # A backfill's run owns its hour, whatever its params say.
    params.update({"start": "2016-11-20T00:00Z"})
    owned = parse_instant("2026-11-20T03:00Z")
    assert interval_problems(params.validate(), "backfill", owned) == []


def test_the_confirmation_param_is_a_switch_that_defaults_off(dag):
    param = dag.params.get_param("confirm_long_interval")
    assert (param.value, param.schema["type"]) == (False, "boolean")
    assert "31 days" in param.description and "backfill" in param.description
