"""BENCHMARKS.md from its template and the results files in bench/results/: rendering only, no reruns.

Usage (from the repository; ``make benchmarks-md`` runs it):
    python -m bench.render [--results bench/results] [--out BENCHMARKS.md]

The template (``bench/BENCHMARKS.md.template``) is the file's prose; a line of its own
``{{scenario NAME | COMMAND}}`` becomes scenario NAME's figures from ``bench/results/NAME.json``
(:func:`bench.harness.save_results`): the ``render(results)`` of the module it names, or the
Markdown it saved, or a table of its figures; without a results file, a line saying that COMMAND
measures it. A results file the template does not place is rendered at ``{{other scenarios}}``,
so a new scenario needs no edit here. ``{{key figures}}`` is ``summary.json``, each key with the
scenario that wrote it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
from pathlib import Path

from bench.harness import PROJECT_DIR, RESULTS, SUMMARY, declared_tables, save_results

TEMPLATE = Path(__file__).with_name("BENCHMARKS.md.template")
PLACEHOLDER = re.compile(r"^\{\{scenario (\w+) \| (.+)\}\}$")


def load(results_dir: Path, name: str) -> dict | None:
    """A results file; one a scenario wrote without the harness (a flat object of figures) is
    taken as its figures, the summary keys among them its own."""
    path = results_dir / f"{name}.json"
    if not path.exists():
        return None
    saved = json.loads(path.read_text())
    if "benchmark" not in saved:
        figures = {k: v for k, v in saved.items() if not isinstance(v, dict | list)}
        summary = json.loads((results_dir / SUMMARY).read_text()) if name != "summary" else {}
        saved = {"figures": figures, "summary_keys": [k for k in figures if k in summary]}
    return saved


def measured_at(saved: dict) -> str:
    results = saved.get("results") or {}
    return str(results.get("measured_at") or saved.get("saved_at") or "?")


def figures_table(figures: dict) -> str:
    rows = ["| figure | value |", "| --- | ---: |"]
    return "\n".join(rows + [f"| `{key}` | {value} |" for key, value in figures.items()])


def body(name: str, saved: dict) -> str:
    """The section's figures: its module's ``render`` of its results, its Markdown, or its figures."""
    if "results" in saved:
        module = importlib.import_module(saved.get("renderer") or f"bench.{name}")
        text = module.render(saved["results"])
    else:
        text = saved.get("section") or figures_table(saved.get("figures", {}))
    lines = [line for line in text.strip("\n").splitlines() if not line.startswith("<!-- ")]
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and re.match(r"#+ ", lines[0]):  # the template titles the section
        lines.pop(0)
    return "\n".join(lines).strip("\n")


def scenario(name: str, command: str, saved: dict | None, tables: list[str]) -> str:
    if saved is None:
        return (
            f"\nNot measured on today's tables yet (no `bench/results/{name}.json`): `{command}` "
            "measures it, then `make benchmarks-md` renders it here. Earlier figures: "
            "docs/benchmark-history.md."
        )
    out = [f"*Reproduce:* `{command}`, then `make benchmarks-md`.", ""]
    if saved.get("per_table", True):
        left_out = [table for table in tables if table not in saved.get("catalog", tables)]
        if left_out:
            out += [
                f"*Leaves out* {', '.join(f'`{table}`' for table in left_out)}: declared after this "
                f"run ({measured_at(saved)[:10]}); `{command}` measures "
                + ("them." if len(left_out) > 1 else "it."),
                "",
            ]
    out.append(body(name, saved))
    return "\n".join(out)


def key_figures(results_dir: Path, saved: dict[str, dict]) -> str:
    """summary.json's keys, each with the scenario that wrote it."""
    path = results_dir / SUMMARY
    summary = json.loads(path.read_text()) if path.exists() else {}
    if not summary:
        return "No `bench/results/summary.json` yet."
    owner = {key: name for name, data in saved.items() for key in data.get("summary_keys", [])}
    rows = ["| key | value | from |", "| --- | ---: | --- |"]
    for key in sorted(summary, key=lambda k: (owner.get(k, "~"), k)):
        value = summary[key]
        shown = ", ".join(map(str, value)) if isinstance(value, list) else value
        rows.append(f"| `{key}` | {shown} | {owner.get(key, 'no results file names it')} |")
    return "\n".join(rows)


def render_all(results_dir: Path = RESULTS, template: Path = TEMPLATE) -> str:
    tables = declared_tables()
    lines = template.read_text().splitlines()
    placed = {m.group(1) for line in lines if (m := PLACEHOLDER.match(line))}
    files = sorted(p.stem for p in results_dir.glob("*.json") if p.name != SUMMARY)
    saved = {name: load(results_dir, name) for name in files}
    out = []
    for line in lines:
        if match := PLACEHOLDER.match(line):
            out.append(scenario(match[1], match[2], saved.get(match[1]), tables))
        elif line == "{{key figures}}":
            out.append(key_figures(results_dir, saved))
        elif line == "{{other scenarios}}":
            for name in (n for n in saved if n not in placed):
                data = saved[name]
                command = data.get("command") or f"python -m bench.{name}"
                title = data.get("title") or name
                out.append(f"## {title}\n\n{scenario(name, command, data, tables)}\n")
        elif line or (out and out[-1]):  # no run of blank lines where nothing was placed
            out.append(line)
    return "\n".join(out).strip("\n") + "\n"


def write(out: Path, results_dir: Path = RESULTS) -> None:
    out.write_text(render_all(results_dir))


def publish(
    section: str,
    out: str | None,
    summary: str | None,
    figures: dict,
    *,
    benchmark: str,
    results: dict | None = None,
    **saved,
) -> None:
    """Print a scenario's section, keep its results beside ``summary`` and render ``out`` from them.

    The results go to the folder of ``summary`` (default: bench/results when ``out`` is given);
    with ``results`` the saved file holds them (the renderer reads them back), else the section.
    """
    print(section)
    if summary is None and out is None:
        return
    results_dir = Path(summary).parent if summary else RESULTS
    save_results(
        benchmark,
        results_dir,
        results=results,
        section=None if results is not None else section,
        figures=figures,
        **saved,
    )
    if out:
        write(Path(out), results_dir)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=str(RESULTS), help="the folder of the results files")
    parser.add_argument("--out", default=str(PROJECT_DIR / "BENCHMARKS.md"))
    options = parser.parse_args(argv)
    write(Path(options.out), Path(options.results))
    print(f"BENCHMARKS.md rendered: {options.out}")


if __name__ == "__main__":
    main()
