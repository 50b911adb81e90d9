"""The engine comparison's figures: samples and medians per contender, and the project's run step by
step (each task's CPU, beside the baseline commit's or the batch form's)."""

from __future__ import annotations

from bench.compare import BASELINE, BATCH, LABELS, OPEN_SESSIONS, USER_SESSIONS
from bench.harness import cell, median


def samples(results: dict, size: str, contender: str, measure: str = "cpu") -> list[float]:
    return [
        r[measure]
        for r in results["runs"]
        if r["size"] == size and r["contender"] == contender and r["ok"]
    ]


def cpu_ratio(results: dict, size: str, contender: str) -> float | None:
    """Project CPU ÷ the contender's (medians): how many times the project's cost per event is the contender's."""
    project, other = (
        median(samples(results, size, "project")),
        median(samples(results, size, contender)),
    )
    return project / other if project and other else None


def size_labels(results: dict) -> list[str]:
    return list(results["datasets"])


# How a table's verdict reads in the per-table check (statuses of bench.compare.check).


def sessions_cpu(results: dict, size: str, contender: str) -> list[float]:
    """CPU seconds of a contender's sessions: the project's sessions task; a minimal job's steps
    from silver to both sessions tables written."""
    runs = [
        r
        for r in results["runs"]
        if r["size"] == size and r["contender"] == contender and r["ok"] and "job" in r
    ]
    task = results.get("sessions_task")
    if contender in ("project", BATCH, BASELINE):
        return [r["job"]["tasks"][task]["cpu"] for r in runs if task in r["job"].get("tasks", {})]
    out = []
    for run in runs:
        steps = run["job"].get("steps", {})
        parts = [steps.get(name) for name in ("sessions", USER_SESSIONS, OPEN_SESSIONS)]
        cpus = [part.get("cpu") for part in parts if isinstance(part, dict)]
        if cpus and None not in cpus:
            out.append(sum(cpus))
    return out


def project_layers(
    results: dict, size: str, contender: str = "project"
) -> list[tuple[str, str, list[float], list[float]]]:
    """(row label, layer, CPU samples, wall samples) of the project's runs at ``size``: start-up, each task, stop, the rest."""
    runs = [
        r
        for r in results["runs"]
        if r["size"] == size and r["contender"] == contender and r["ok"] and "job" in r
    ]
    if not runs:
        return []
    rows = [
        (
            "process start, imports, JVM, session",
            "",
            [r["job"]["setup"]["cpu"] for r in runs],
            [r["job"]["setup"]["wall"] for r in runs],
        )
    ]
    for task, figures in runs[0]["job"]["tasks"].items():
        rows.append(
            (
                f"`{task}`",
                figures["layer"],
                [r["job"]["tasks"][task]["cpu"] for r in runs],
                [r["job"]["tasks"][task]["wall"] for r in runs],
            )
        )
    rest_cpu = [
        r["cpu"] - r["job"]["setup"]["cpu"] - sum(t["cpu"] for t in r["job"]["tasks"].values())
        for r in runs
    ]
    rest_wall = [
        r["wall"] - r["job"]["setup"]["wall"] - sum(t["wall"] for t in r["job"]["tasks"].values())
        for r in runs
    ]
    rows.append(("spark.stop(), JVM and process exit", "", rest_cpu, rest_wall))
    return rows


def layer_totals(results: dict, size: str) -> dict[str, float]:
    """Median CPU seconds per layer of the project's tasks at ``size``."""
    totals: dict[str, list[float]] = {}
    runs = [
        r
        for r in results["runs"]
        if r["size"] == size and r["contender"] == "project" and r["ok"] and "job" in r
    ]
    for run in runs:
        per_layer: dict[str, float] = {}
        for figures in run["job"]["tasks"].values():
            per_layer[figures["layer"]] = per_layer.get(figures["layer"], 0.0) + figures["cpu"]
        for layer, cpu in per_layer.items():
            totals.setdefault(layer, []).append(cpu)
    return {layer: median(values) for layer, values in totals.items()}


def project_section(results: dict) -> list[str]:
    sizes = [s for s in size_labels(results) if project_layers(results, s)]
    if not sizes:
        return []
    header = (
        "| the project's run | layer | "
        + " | ".join(f"{s} CPU s | {s} wall s" for s in sizes)
        + " |"
    )
    out = [
        "The project's run, step by step (CPU = its Python process + its driver JVM, read before and after each task; "
        "median (min–max)):",
        "",
        header,
        "| --- | --- |" + " ---: | ---: |" * len(sizes),
    ]
    by_size = {s: project_layers(results, s) for s in sizes}
    for index, (label, layer, _, _) in enumerate(by_size[sizes[0]]):
        cells = []
        for s in sizes:
            _, _, cpu, wall = by_size[s][index]
            cells.append(f"{cell(cpu)} | {cell(wall)}")
        out.append(f"| {label} | {layer} | " + " | ".join(cells) + " |")
    whole = [
        f"{cell(samples(results, s, 'project'))} | {cell(samples(results, s, 'project', 'wall'))}"
        for s in sizes
    ]
    out.append("| **whole process tree** | | " + " | ".join(whole) + " |")
    out.append("")
    for s in sizes:
        totals = layer_totals(results, s)
        total = median(samples(results, s, "project"))
        if totals and total:
            out.append(
                f"By layer at {s}: "
                + ", ".join(
                    f"{layer} {cpu:.1f} CPU-s ({cpu / total:.0%})" for layer, cpu in totals.items()
                )
                + f" of {total:.1f}."
            )
    return out


def label_of(results: dict, contender: str) -> str:
    if contender == BASELINE:
        return f"project at {results.get('baseline')} (baseline)"
    return LABELS[contender]


def steps_side_by_side(results: dict, other: str) -> list[str]:
    """The project's steps beside another run of the project's tasks, ``other``: the baseline commit
    (``--baseline``: the change's before and after) or the batch form (where incremental costs more)."""
    sizes = [
        s
        for s in size_labels(results)
        if project_layers(results, s, other) and project_layers(results, s)
    ]
    if not sizes:
        return []
    if other == BASELINE:
        title = f"The change since {results['baseline']}, step by step"
        columns = [f"{s} at {results['baseline']} | {s} at {results['commit']}" for s in sizes]
    else:
        title = (
            "The incremental run beside the batch form (a backfill of the same hours), step by step"
        )
        columns = [f"{s} batch | {s} incremental | {s} ratio" for s in sizes]
    out = [
        f"{title} (CPU s, median (min–max); the same run, alternating):",
        "",
        "| step | layer | " + " | ".join(columns) + " |",
        "| --- | --- |"
        + (" ---: | ---: |" if other == BASELINE else " ---: | ---: | ---: |") * len(sizes),
    ]
    before = {s: project_layers(results, s, other) for s in sizes}
    after = {s: project_layers(results, s) for s in sizes}

    def cells(then: list[float], now: list[float]) -> str:
        if other == BASELINE:
            return f"{cell(then)} | {cell(now)}"
        ratio = median(now) / median(then) if median(then) and median(then) > 0 else None
        return f"{cell(then)} | {cell(now)} | " + (f"{ratio:.2f}×" if ratio else "–")

    for index, (label, layer, _, _) in enumerate(after[sizes[0]]):
        out.append(
            f"| {label} | {layer} | "
            + " | ".join(cells(before[s][index][2], after[s][index][2]) for s in sizes)
            + " |"
        )
    out.append(
        "| **whole process tree** | | "
        + " | ".join(
            cells(samples(results, s, other), samples(results, s, "project")) for s in sizes
        )
        + " |"
    )
    return [*out, ""]


def short_label(results: dict, contender: str) -> str:
    return label_of(results, contender).split(" (")[0]
