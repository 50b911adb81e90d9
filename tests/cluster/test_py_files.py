"""The project's Python code reaches cluster executors through --py-files, and through nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from pyfiles import PACKAGE_DIR, build_zip

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("probe_py_files.py")
VENV_BIN = Path(sys.executable).parent

pytestmark = pytest.mark.timeout(600)


def submit_probe(cluster, cwd: Path, py_files: Path | None = None, **env: str) -> dict:
    """spark-submit probe_py_files.py to the cluster; returns what its executors reported."""
    # Neither this checkout's package path nor pyspark's Connect mode (tests read on the engine).
    environment = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_CONNECT_MODE_ENABLED")
    }
    environment.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, **env})
    cmd = [
        str(VENV_BIN / "spark-submit"),
        "--master",
        cluster.master_url,
        "--conf",
        "spark.ui.enabled=false",
    ]
    cmd += ["--py-files", str(py_files)] if py_files else []
    result = subprocess.run(
        [*cmd, str(PROBE)],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("PROBE ")]
    assert result.returncode == 0 and lines, result.stdout[-2000:] + result.stderr[-4000:]
    report = json.loads(lines[-1].removeprefix("PROBE "))
    assert report["executors"], "the probe ran no task"
    for executor in report["executors"]:
        # Python workers of the cluster's executor: other processes, in the worker's folder.
        assert executor["pid"] != report["driver_pid"]
        assert Path(executor["cwd"]).is_relative_to(cluster.work_dir), executor
    return report


def test_executors_import_the_lakehouse_package_from_the_py_files_zip(
    spark_cluster, py_files, tmp_path
):
    report = submit_probe(spark_cluster, tmp_path, py_files)
    for executor in report["executors"]:
        assert executor["lakehouse"].endswith("lakehouse.zip/lakehouse/config.py"), executor


# The editable install is a .pth in site-packages naming a folder (or an import hook): drop the
# folder's entry (unless PYTHONPATH names it too: the .pth then added nothing) and any hook.
SITECUSTOMIZE_WITHOUT_THE_PROJECT = """\
import glob, os, site, sys
for pth in glob.glob(os.path.join(site.getsitepackages()[0], "__editable__*.pth")):
    for entry in open(pth).read().split():
        if entry in sys.path and entry not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
            sys.path.remove(entry)
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in repr(f)]
"""


def python_without_the_project(folder: Path) -> Path:
    """This venv's Python with the project's editable install hidden: an executor host's Python.

    ``make venv`` installs the project (editable) for the tools and tests; an executor on another
    machine has only its own Python. A ``sitecustomize`` drops the install's import finder.
    """
    hidden = folder / "hidden"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text(SITECUSTOMIZE_WITHOUT_THE_PROJECT)
    python = folder / "python"
    python.write_text(
        f'#!/bin/sh\nPYTHONPATH="{hidden}${{PYTHONPATH:+:$PYTHONPATH}}" exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    return python


def test_without_py_files_executors_cannot_import_it_even_from_the_drivers_checkout(
    spark_cluster, tmp_path
):
    # The driver runs in include/ with PYTHONPATH=include, as a developer's shell would: neither
    # its working directory nor its environment may reach the executors. Were the executors to
    # import the package anyway, a missing --py-files would go unnoticed here and fail on a real
    # cluster.
    include = ROOT / "include"
    python = python_without_the_project(tmp_path)
    report = submit_probe(
        spark_cluster, include, None, PYTHONPATH=str(include), PYSPARK_PYTHON=str(python)
    )
    for executor in report["executors"]:
        assert executor["lakehouse"].startswith("ModuleNotFoundError"), executor


def test_the_py_files_zip_holds_exactly_the_package_and_is_reproducible(tmp_path):
    first = build_zip(tmp_path / "a" / "lakehouse.zip")
    second = build_zip(tmp_path / "b" / "lakehouse.zip")
    assert first.read_bytes() == second.read_bytes()
    sources = {
        f"lakehouse/{p.relative_to(PACKAGE_DIR).as_posix()}" for p in PACKAGE_DIR.rglob("*.py")
    }
    with zipfile.ZipFile(first) as zf:
        assert set(zf.namelist()) == {s for s in sources if "__pycache__" not in s}
        assert (
            "lakehouse/__init__.py" in zf.namelist()
            and "lakehouse/tables/__init__.py" in zf.namelist()
        )
