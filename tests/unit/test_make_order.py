"""The order make runs the setup in: on S3, no driver starts before the S3 jars and the server.

`make -n -B` prints every recipe of a target's whole prerequisite tree, in the order make would
run them, as on a fresh clone (``-B``: every stamp taken as out of date), and runs none.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

PROJECT_DIR = Path(__file__).resolve().parents[2]
# What a recipe line of each step starts with or holds.
S3_JARS_BUILT = "lakehouse-s3-commit-store.jar -C"
S3_SERVER_STARTED = "include/s3/server.py start"
S3_GATEWAY_INSTALLED = "go install github.com/versity/versitygw/cmd/versitygw@"
# Every recipe that starts a Spark driver (each checks for the S3 jars when its root is on S3).
DRIVERS = (
    "lakehouse_tools.metastore_server up",
    "lakehouse_tools.engine up",
    "lakehouse_tools.demo",
)


def dry_run(*targets: str) -> list[str]:
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", *targets],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def first_line(lines: list[str], text: str) -> int:
    found = [number for number, line in enumerate(lines) if text in line]
    assert found, f"no recipe line holds {text!r}"
    return found[0]


@pytest.mark.parametrize("target", ["demo", "engine-up", "metastore-up"])
def test_on_s3_every_driver_starts_after_the_s3_jars_and_the_server(target):
    lines = dry_run(target, "STORAGE=s3")
    jars = first_line(lines, S3_JARS_BUILT)
    server = first_line(lines, S3_SERVER_STARTED)
    assert first_line(lines, S3_GATEWAY_INSTALLED) < server
    drivers = [first_line(lines, driver) for driver in DRIVERS if any(driver in x for x in lines)]
    assert drivers, f"`make {target}` starts no driver"
    assert min(drivers) > max(jars, server), "\n".join(lines)


def test_on_local_disk_the_demo_needs_no_s3_server():
    lines = dry_run("demo")
    assert not [line for line in lines if S3_SERVER_STARTED in line or S3_JARS_BUILT in line]


def test_the_suite_installs_the_s3_gateway_and_jars():
    lines = dry_run("test")
    # `make test` runs its setup through a sub-make: -n prints that line, with the targets.
    setup = lines[first_line(lines, "--output-sync=target setup")]
    assert "s3-gateway" in setup and "s3-jars" in setup
