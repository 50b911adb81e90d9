"""The table-name metastore's settings: one database per lakehouse root, a server that does not
answer refused before any JVM starts (no Spark here; tests/integration/test_table_names.py runs it)."""

from __future__ import annotations

import pytest

from lakehouse import metastore
from lakehouse.errors import ConfigError
from lakehouse_airflow.preflight import preflight
from lakehouse_tools import metastore_server
from lakehouse_tools.engine import free_port


@pytest.fixture
def state(tmp_path, monkeypatch):
    """A metastore folder with a stand-in template, and a port nothing listens on."""
    template = tmp_path / "metastore" / "template"
    (template / "seg0").mkdir(parents=True)
    (template / "service.properties").write_text("derby\n")
    monkeypatch.setenv("LAKEHOUSE_METASTORE_DIR", str(tmp_path / "metastore"))
    monkeypatch.setenv("LAKEHOUSE_METASTORE_PORT", str(free_port()))
    monkeypatch.delenv("LAKEHOUSE_METASTORE", raising=False)
    return metastore.settings()


def test_a_driver_without_the_server_fails_before_its_jvm_saying_what_to_run(state, monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(state.state_dir.parent / "lakehouse"))
    with pytest.raises(ConfigError, match=f"127.0.0.1:{state.port}.*make metastore-up"):
        metastore.spark_conf()
    problems = preflight({"source": "kafka"}, "manual", None)
    assert [p for p in problems if "metastore" in p] == [metastore.problem(state)]


def test_no_metastore_when_turned_off_or_without_a_root(state, monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_ROOT", "/somewhere")
    monkeypatch.setenv("LAKEHOUSE_METASTORE", "none")
    assert metastore.spark_conf() == {}
    monkeypatch.setenv("LAKEHOUSE_METASTORE", "derby")
    monkeypatch.delenv("LAKEHOUSE_ROOT")
    assert metastore.spark_conf() == {}
    monkeypatch.setenv("LAKEHOUSE_METASTORE", "hive")
    with pytest.raises(ConfigError, match="LAKEHOUSE_METASTORE='hive': use derby"):
        metastore.enabled()


def test_each_root_gets_its_own_database_copied_once_from_the_template(state, tmp_path):
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    database = metastore.ensure_database(first, state)
    assert (database / "service.properties").read_text() == "derby\n"
    (database / "service.properties").write_text("in use\n")
    assert metastore.ensure_database(first, state) == database  # not copied again
    assert (database / "service.properties").read_text() == "in use\n"
    assert metastore.ensure_database(second, state) != database
    assert database.with_suffix(".root").read_text() == f"{first}\n"
    url = metastore.hive_conf(state.url(database), state.state_dir)[
        "spark.hadoop.javax.jdo.option.ConnectionURL"
    ]
    assert url == f"jdbc:derby://127.0.0.1:{state.port}/{database}"


def test_up_deletes_the_databases_of_roots_gone_and_keeps_the_others(state, tmp_path):
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    kept.mkdir()
    kept_db = metastore.ensure_database(str(kept), state)
    gone_db = metastore.ensure_database(str(gone), state)
    s3_db = metastore.ensure_database("s3a://bucket/lakehouse", state)
    assert metastore_server.prune(state) == 1
    assert kept_db.is_dir() and s3_db.is_dir() and not gone_db.exists()
