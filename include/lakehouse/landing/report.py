"""What ``lakehouse status`` says about the landing zone: every file bronze does not read as events.

:func:`landing_report` gathers, from files alone (no Spark, nothing written), the files the source
ignores or reads with a caveat, the ones changed after bronze read them, the new ``.jsonl.gz``
files that would refuse the next run, and the copies of files bronze has read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.files import lake_path
from lakehouse.landing.changes import changed_files
from lakehouse.landing.listing import landed_path, relative_name
from lakehouse.landing.plan import copied_files, plan_new_files
from lakehouse.landing.problems import LandingProblem, Problem, ignored_files

if TYPE_CHECKING:
    from lakehouse.config import Lakehouse


def landing_report(
    lakehouse: Lakehouse, source: str = "events", generation: int | None = None
) -> dict:
    """What the landing zone holds that bronze will not read as events, for ``lakehouse status``.

        ``{"ignored": [...], "changed": [...], "copies": [...]}``, each a list of
        :class:`LandingProblem` dicts (file under the landing folder, reason code, detail, what to do,
        whether bronze reads it; a copy's original). Copies include the new files the next run will
        recognise as copies. Reads files only, writes nothing, starts no Spark. A whole look: every
    folder and every record (a run's checks list only the folders that can hold new files). ``generation``:
        bronze's checkpoint generation (default: the current one).
    """
    bronze = lakehouse.table("bronze.ad_events")
    root = lakehouse.landing(source)
    checkpoint = bronze.checkpoint() if generation is None else bronze.checkpoint(generation)
    plan = plan_new_files(checkpoint, root, write=False, table_path=bronze.path, whole=True)
    broken = [
        LandingProblem(
            relative_name(landed_path(uri), lake_path(root)),
            Problem.BROKEN_GZIP,
            f"named .jsonl.gz but does not decompress ({why}): bronze refuses to run until it is "
            "gone",
            "hide it (rename it to start with '.') or move it out of the landing zone, and land a "
            "good copy under a new name",
            False,
        )
        for uri, why in sorted(plan.broken_gzip.items())
    ]
    return {
        "ignored": [problem.as_dict() for problem in (*ignored_files(root), *broken)],
        "changed": [
            problem.as_dict()
            for problem in changed_files(
                checkpoint, root, write=False, table_path=bronze.path, index=plan.index
            )
        ],
        "copies": [problem.as_dict() for problem in copied_files(root, plan.manifest)],
    }
