"""Object storage: a private S3 server (include/s3/server.py) and an engine started for it.

The module's lakehouses live under ``s3a://lakehouse/<test>``; the engine that runs their jobs is
started after the server, with its endpoint and keys, as ``make engine-up STORAGE=s3`` would. One
such engine serves every file of this folder: `make test` runs them on one worker, one after the
other (tests/conftest.py, ``SHARED_WORKER_FOLDERS``), so the second file finds it warm.
"""

from __future__ import annotations

import secrets
from contextlib import ExitStack

import pytest
from s3_server import BUCKET, running_s3_server, s3_environment

from lakehouse.config import Lakehouse


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A private S3 server on a free port of 127.0.0.1: its settings as AWS_* variables."""
    with running_s3_server(tmp_path_factory.mktemp("s3")) as settings:
        yield settings


@pytest.fixture(scope="module")
def s3_settings(s3_server):
    """The S3 settings in this process's environment for the module (undone after it)."""
    with pytest.MonkeyPatch.context() as patch, s3_environment(s3_server, patch.setenv):
        yield patch


@pytest.fixture(scope="session")
def s3_engine_variables(s3_server, tmp_path_factory):
    """An engine started for S3 (its root on the server), up until the session ends: the variables
    that name it to a module's jobs. The S3 settings are this process's only while it starts."""
    from helpers import private_engine

    variables = {"LAKEHOUSE_ROOT": f"s3a://{BUCKET}/engine"}
    with ExitStack() as engine:
        with pytest.MonkeyPatch.context() as patch, s3_environment(s3_server, patch.setenv):
            patch.setenv("LAKEHOUSE_ROOT", variables["LAKEHOUSE_ROOT"])
            engine.enter_context(
                private_engine(tmp_path_factory.mktemp("s3-engine"), variables.__setitem__)
            )
        yield variables


@pytest.fixture(scope="module")
def s3_engine(s3_settings, s3_server, s3_engine_variables):
    """The S3 engine, named to the module's jobs (undone after it)."""
    for name, value in s3_engine_variables.items():
        s3_settings.setenv(name, value)
    return s3_server


@pytest.fixture
def s3_lakehouse(s3_settings, request) -> Lakehouse:
    """A lakehouse of the test's own on the S3 server."""
    name = request.node.name.replace("[", "-").replace("]", "")
    return Lakehouse(root=f"s3a://{BUCKET}/{name}-{secrets.token_hex(3)}")


@pytest.fixture(scope="module")
def s3_reader(s3_engine):
    """A session on the module's engine, for reading the S3 tables."""
    from lakehouse.spark import build_spark_session

    session = build_spark_session("s3-tests", engine_kind="connect", outlives_jobs=True)
    yield session
    session.stop()
