"""A task process imports its own write kind's flow only (issue 60: a small hour's fixed cost)."""

from __future__ import annotations

import subprocess
import sys

from lakehouse import catalog
from lakehouse.runner import flow_job


def test_each_write_kind_runs_by_its_flow_module():
    for spec in catalog.tasks():
        job = flow_job(spec)
        assert callable(job.run), spec.task
        assert job.__name__.startswith("lakehouse.flows."), spec.task
    assert flow_job(catalog.task("gold_user_sessions")).__name__ == "lakehouse.flows.sessions"
    assert flow_job(catalog.task("gold_aggregates")).__name__ == "lakehouse.flows.recompute"


def test_the_runner_does_not_import_the_sessions_flow_for_other_tasks():
    code = (
        "import sys, lakehouse.runner as r; from lakehouse import catalog; "
        "r.flow_job(catalog.task('gold_aggregates')); "
        "print('lakehouse.flows.sessions' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_lazy_session_is_built_on_first_use_only(monkeypatch):
    from lakehouse import spark as lakehouse_spark

    built = []

    class Session:
        conf = "the session's conf"

    def build(app_name, *args, **kwargs):
        built.append(app_name)
        return Session()

    monkeypatch.setattr(lakehouse_spark, "build_spark_session", build)
    lazy = lakehouse_spark.lazy_session("gold_ad_hourly")
    assert built == [] and not lazy.built
    assert (
        getattr(lazy, "__getstate_of_copy__", None) is None
    )  # a dunder (pickle, copy): not the session's
    assert built == []
    assert lazy.conf == "the session's conf" and lazy.conf == "the session's conf"
    assert built == ["gold_ad_hourly"] and lazy.built
