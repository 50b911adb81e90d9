"""LAKEHOUSE_ENGINE_JAVA_OPTIONS: an operator's JVM options for the engine come after the project's,
so where the two disagree the operator's wins (HotSpot takes the last of a repeated flag)."""

import os
import re
import shlex
import subprocess

import pytest

from lakehouse.spark import LONG_RUN_JAVA_OPTIONS
from lakehouse_tools.engine import server_command


def engine_flag(name: str) -> str:
    """The value the engine's JVM would run with for ``-XX:<name>``, asked of this machine's java."""
    command = server_command()
    java = (  # the one spark-submit runs
        os.path.join(os.environ["JAVA_HOME"], "bin", "java")
        if "JAVA_HOME" in os.environ
        else "java"
    )
    options = shlex.split(command[command.index("--driver-java-options") + 1])
    flags = subprocess.run(
        [java, *(o for o in options if o.startswith("-XX:")), "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return re.search(rf"\b{name}\s*=\s*(\S+)", flags).group(1)


@pytest.mark.parametrize(
    ("added", "expected"),
    [(None, "false"), ("-XX:+DontCompileHugeMethods", "true")],
    ids=["the project's", "the operator's"],
)
def test_an_engine_option_from_the_environment_overrides_the_projects_own(
    monkeypatch, tmp_path, added, expected
):
    assert "-XX:-DontCompileHugeMethods" in LONG_RUN_JAVA_OPTIONS  # the project's, overridden here
    # The command links its SPARK_HOME into the engine's folder: one of the test's own.
    monkeypatch.setenv("LAKEHOUSE_ENGINE_DIR", str(tmp_path))
    if added is None:
        monkeypatch.delenv("LAKEHOUSE_ENGINE_JAVA_OPTIONS", raising=False)
    else:
        monkeypatch.setenv("LAKEHOUSE_ENGINE_JAVA_OPTIONS", added)
    assert engine_flag("DontCompileHugeMethods") == expected
