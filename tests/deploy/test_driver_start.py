"""The fast-start driver options: the class-data-sharing archive `make driver-cds` builds really maps.

A JVM silently skips an archive it cannot map (another JDK, another classpath), so a broken
archive would only show as slower drivers; ``-Xshare:on`` turns that into a failure here.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from lakehouse import catalog
from lakehouse.spark import driver_cds_archive, fast_start_java_options
from lakehouse_tools.fault_harness.launch import spark_submit_command

PROJECT_DIR = Path(__file__).resolve().parents[2]
SPARK_SUBMIT = str(Path(sys.executable).parent / "spark-submit")


def test_the_archive_is_built_and_maps_into_a_spark_submit_driver():
    archive = driver_cds_archive()
    assert archive.is_file(), f"{archive} missing: `make test` builds it (make driver-cds)"
    options = fast_start_java_options()
    assert shlex.split(options) == [
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        f"-XX:SharedArchiveFile={archive}",
    ]

    # --version starts the same SparkSubmit JVM (same classpath) as a job's spark-submit.
    mapped = subprocess.run(
        [
            SPARK_SUBMIT,
            "--driver-java-options",
            f"-Xshare:on -Xlog:cds=info {options}",
            "--version",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = mapped.stdout + mapped.stderr
    assert mapped.returncode == 0, output[-3000:]
    assert "Mapped dynamic region" in output, output[-3000:]


def test_a_foreign_archive_is_refused_under_xshare_on(tmp_path):
    # The check above would pass vacuously if -Xshare:on did not insist on the archive.
    foreign = tmp_path / "foreign.jsa"
    foreign.write_bytes(b"not a CDS archive" * 100)
    refused = subprocess.run(
        [
            SPARK_SUBMIT,
            "--driver-java-options",
            f"-Xshare:on -XX:SharedArchiveFile={foreign}",
            "--version",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0


def test_the_fault_harness_starts_its_drivers_with_the_fast_start_options(lakehouse):
    task = catalog.tasks()[-1].task
    command = spark_submit_command(task, lakehouse)
    assert command[command.index("--driver-java-options") + 1] == fast_start_java_options()
    assert command[command.index(task) - 1] == str(PROJECT_DIR / "jobs" / "run.py")
