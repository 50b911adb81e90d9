"""A driver without the conditional-put commit store is refused an S3 lakehouse, with the fix.

Delta's default S3 store checks, then writes: two writers on one table can both take a version and
one's commit is overwritten, both told it succeeded. The session fixture here is such a driver (a
real local session started for a local root: no S3 settings at all).
"""

from __future__ import annotations

import pytest

from lakehouse import object_storage
from lakehouse.errors import ConfigError
from lakehouse.spark import require_commit_store, session_conf

S3_ROOT = "s3a://lakehouse/refused"


def test_a_session_without_the_store_is_refused_an_s3_root_with_the_fix(spark, monkeypatch):
    assert spark.conf.get(object_storage.LOG_STORE_KEY, None) != object_storage.COMMIT_STORE
    assert require_commit_store(spark) is spark  # a local root: any store may write it
    monkeypatch.setenv("LAKEHOUSE_ROOT", S3_ROOT)
    with pytest.raises(ConfigError) as refused:
        require_commit_store(spark)
    assert str(refused.value).startswith("This Spark driver commits to S3 with ")
    assert f"{object_storage.LOG_STORE_KEY}={object_storage.COMMIT_STORE}" in str(refused.value)


def test_the_drivers_settings_for_an_s3_root_carry_the_store_and_no_secret(monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_ROOT", S3_ROOT)
    monkeypatch.setenv("LAKEHOUSE_METASTORE", "none")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "LHKEYID")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-secret-itself")
    conf = session_conf()
    assert object_storage.commit_store_problem(conf[object_storage.LOG_STORE_KEY]) is None
    # The keys come from the JVM's environment: no setting (a command line's --conf) holds them.
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"] == (
        object_storage.ENVIRONMENT_CREDENTIALS
    )
    assert [k for k, v in conf.items() if "the-secret-itself" in v or "LHKEYID" in v] == []
    assert object_storage.commit_store_problem(None).startswith("This Spark driver commits")
    assert object_storage.commit_store_problem(None, "/tmp/local-root") is None
