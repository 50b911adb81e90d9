"""BENCHMARKS.md from its template and the results files alone (bench/render.py): no reruns, no Spark.

A section comes from its scenario's results file; a scenario without one says which command
measures it; a section measured before a table the catalog declares today says it leaves it out;
the key figures name the scenario that wrote them; a results file the template does not place
is rendered all the same.
"""

from __future__ import annotations

import json
import re

from bench import render
from bench.harness import declared_tables, save_results


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
    assert (
        "*Reproduce:* `git checkout d13d50f && make bench-engine`, then `make benchmarks-md`."
        in (section)
    )
    assert f"*Leaves out* `{tables[-1]}`: declared after this run" in section
    assert "| idle | 6.5 |" in section and "An old title" not in section
    assert "| `backfill_3h_s` | 41.09 | engine_runs |" in report
    assert "| `stray` | 1 | no results file names it |" in report
    # Every other scenario the template places: one line with the command that measures it.
    for name, command in render.PLACEHOLDER.findall(render.TEMPLATE.read_text()):
        if name != "engine_runs":
            assert f"no `bench/results/{name}.json`): `{command}` measures it" in report
    assert "{{" not in report


def test_a_scenario_that_renders_its_own_markdown_is_kept_and_rendered(tmp_path, capsys):
    begin, end = "<!-- bench/sessions_runs.py: begin -->", "<!-- bench/sessions_runs.py: end -->"
    out = tmp_path / "BENCHMARKS.md"
    summary = tmp_path / "results" / "summary.json"
    text = f"{begin}\n## 13. Sessions\n\nfigures\n{end}\n"
    render.publish(text, str(out), str(summary), {"k": 2.5}, benchmark="sessions_runs")

    saved = json.loads((tmp_path / "results" / "sessions_runs.json").read_text())
    assert saved["catalog"] == declared_tables() and saved["summary_keys"] == ["k"]
    assert json.loads(summary.read_text()) == {"k": 2.5}
    text = out.read_text()
    assert "## The sessions query on hourly runs" in text and "\nfigures\n" in text
    assert begin not in text and "*Leaves out*" not in text


def test_a_new_scenario_needs_no_edit_of_the_renderer(tmp_path):
    """A scenario the template does not name (e.g. bench/export_cost.py) is rendered from its file."""
    figures = {"export_cpu_s": 14.2}
    save_results(
        "export_cost", tmp_path, figures=figures, title="An export's cost", per_table=False
    )

    report = render.render_all(tmp_path)

    section = report[report.index("## A small hour") :]
    assert "*Reproduce:* `python -m bench.export_cost`, then `make benchmarks-md`." in section
    assert "| `export_cpu_s` | 14.2 |" in section
    assert "| `export_cpu_s` | 14.2 | export_cost |" in report


def test_the_committed_report_is_the_rendering_of_the_committed_results():
    """BENCHMARKS.md is what `make benchmarks-md` makes of bench/results (no hand edits)."""
    committed = (render.PROJECT_DIR / "BENCHMARKS.md").read_text()
    rendered = render.render_all()
    # A path a section names may be written from another checkout of the repository.
    strip = re.compile(r"/\S+?/(?=BENCHMARKS\.md|bench/)")
    assert strip.sub("", rendered) == strip.sub("", committed)


def test_a_flat_results_file_is_rendered_as_its_figures(tmp_path):
    """A scenario that writes its figures as a flat object, without the harness, still shows."""
    (tmp_path / "summary.json").write_text(json.dumps({"export_cpu_s": 14.2}))
    (tmp_path / "export_cost.json").write_text(json.dumps({"export_cpu_s": 14.2, "events": 2000}))

    report = render.render_all(tmp_path)

    assert "## export_cost" in report and "| `events` | 2000 |" in report
    assert "| `export_cpu_s` | 14.2 | export_cost |" in report
