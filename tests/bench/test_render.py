"""BENCHMARKS.md from the results files alone (bench/render.py): no benchmark reruns, no Spark.

A section comes from its benchmark's results file; a benchmark without one says which command
measures it; a section measured before a table the catalog declares today says it leaves it out;
the key figures name the benchmark that wrote them.
"""

from __future__ import annotations

import json

from bench import render
from bench.render import publish
from bench.sections import declared_tables, markers, save_results


def test_a_report_from_results_files_only(tmp_path):
    tables = declared_tables()
    (tmp_path / "summary.json").write_text(json.dumps({"backfill_3h_s": 41.09, "stray": 1}))
    save_results(
        "engine_runs",
        tmp_path,
        section="## 11. An old title\n\n| DAG run | s |\n| --- | ---: |\n| idle | 6.5 |\n",
        catalog=tables[:-1],
    )
    saved = json.loads((tmp_path / "engine_runs.json").read_text())
    saved["summary_keys"] = ["backfill_3h_s"]
    (tmp_path / "engine_runs.json").write_text(json.dumps(saved))

    report = render.render_all(tmp_path)

    section = report[report.index("## The warm engine") :]
    section = section[: section.index("\n## ", 1)]
    assert "*Reproduce:* `make bench-engine`, then `make benchmarks-md`." in section
    assert f"*Leaves out* `{tables[-1]}`: declared after this run" in section
    assert "| idle | 6.5 |" in section and "An old title" not in section
    assert "| `backfill_3h_s` | 41.09 | engine_runs |" in report
    assert "| `stray` | 1 | no results file names it |" in report
    # Every other benchmark: one line with the command that measures it.
    for benchmark in render.BENCHMARKS:
        assert f"## {benchmark.title}" in report
        if benchmark.name != "engine_runs":
            assert f"`{benchmark.command}` measures it" in report


def test_a_benchmark_that_renders_its_own_markdown_is_kept_and_rendered(tmp_path, capsys):
    begin, end = markers("bench/sessions_runs.py")
    out = tmp_path / "BENCHMARKS.md"
    summary = tmp_path / "results" / "summary.json"
    publish(f"{begin}\n## 13. Sessions\n\nfigures\n{end}\n", str(out), str(summary), {"k": 2.5})

    saved = json.loads((tmp_path / "results" / "sessions_runs.json").read_text())
    assert saved["catalog"] == declared_tables() and saved["summary_keys"] == ["k"]
    assert json.loads(summary.read_text()) == {"k": 2.5}
    text = out.read_text()
    assert "## The sessions query on hourly runs" in text and "\nfigures\n" in text
    assert begin not in text and "*Leaves out*" not in text
