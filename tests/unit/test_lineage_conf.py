"""The OpenLineage settings the engine and the drivers start with (docs/lineage.md, issue 59)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from lakehouse.spark import LINEAGE_REMOVE_PATH_PATTERN, lineage_conf

# The listener's removePath (RemovePathPatternUtils): the pattern's first match (find) in a
# dataset's name, and the text its group `remove` matched cut out. Java's regex, not Python's.
REMOVE_PATH = """
import java.util.regex.*;
public class RemovePath {
  public static void main(String[] args) {
    Pattern pattern = Pattern.compile(args[0]);
    for (int i = 1; i < args.length; i++) {
      Matcher m = pattern.matcher(args[i]);
      String name = args[i];
      if (m.find() && m.group("remove") != null && !m.group("remove").isEmpty()) {
        name = name.substring(0, m.start("remove")) + name.substring(m.end("remove"));
      }
      System.out.println(name);
    }
  }
}
"""


@pytest.fixture
def lineage_on(monkeypatch, tmp_path):
    monkeypatch.setenv("LAKEHOUSE_LINEAGE", "1")
    monkeypatch.setenv("LAKEHOUSE_LINEAGE_DIR", str(tmp_path))
    monkeypatch.delenv("OPENLINEAGE_URL", raising=False)
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in (
        "delta-spark_x.jar",
        "openlineage-spark_2.13-x.jar",
        "openlineage-task-parent.jar",
    ):
        (jars / name).touch()
    monkeypatch.setenv("LAKEHOUSE_JARS_DIR", str(jars))
    return tmp_path


@pytest.mark.parametrize("engine", [False, True])
def test_lineage_conf_names_tables_and_leaves_out_rdd_jobs(lineage_on, engine):
    conf = lineage_conf("events.jsonl", engine=engine)
    assert conf["spark.openlineage.dataset.removePath.pattern"] == LINEAGE_REMOVE_PATH_PATTERN
    assert conf["spark.openlineage.filter.rddEventsDisabled"] == "true"
    if engine:  # the engine's transformer: task parent, job names, the run cycle
        assert conf["spark.openlineage.transport.type"] == "transform"
        assert (
            conf["spark.openlineage.transport.transformerClass"]
            == "lakehouse.lineage.TaskParentTransformer"
        )
        assert conf["spark.openlineage.transport.transport.type"] == "file"
        assert conf["spark.extraListeners"].split(",")[0] == "lakehouse.lineage.JobTagsListener"
    else:
        assert conf["spark.openlineage.transport.type"] == "file"


def test_lineage_conf_is_empty_when_lineage_is_off(monkeypatch):
    monkeypatch.delenv("LAKEHOUSE_LINEAGE", raising=False)
    assert lineage_conf("events.jsonl", engine=True) == {}


@pytest.mark.skipif(not shutil.which("java"), reason="no java")
def test_lineage_remove_path_gives_the_tables_and_landing_sources_names(tmp_path):
    source = tmp_path / "RemovePath.java"
    source.write_text(REMOVE_PATH)
    names = {
        "/r/lakehouse/tables/silver/ad_events/_delta_log": "/r/lakehouse/tables/silver/ad_events",
        "lakehouse/tables/gold/ad_hourly/_delta_log/00000.json": "lakehouse/tables/gold/ad_hourly",
        "/r/lakehouse/tables/silver/ad_events": "/r/lakehouse/tables/silver/ad_events",
        "/r/lakehouse/landing/events/2026-11-20/00": "/r/lakehouse/landing/events",
        "/r/lakehouse/landing/events/2026-11-20": "/r/lakehouse/landing/events",
        "/r/lakehouse/landing/campaigns/campaigns.csv": "/r/lakehouse/landing/campaigns/campaigns.csv",
        # A day-named folder above the landing source is the root's, not an hour's.
        "/r/2026-11-20/lakehouse/tables/dims/campaigns": "/r/2026-11-20/lakehouse/tables/dims/campaigns",
    }
    done = subprocess.run(
        ["java", str(source), LINEAGE_REMOVE_PATH_PATTERN, *names],
        capture_output=True,
        text=True,
        check=True,
    )
    assert dict(zip(names, done.stdout.splitlines(), strict=True)) == names
