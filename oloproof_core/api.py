"""Running a suite from Python (a notebook, a script): the same engine and records as the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def run(config: str | Path = "oloproof.yaml", *, no_cache: bool = False, refresh: bool = False,
        reuse_executions: bool = False, trials: int | None = None) -> Any:
    """Run the suite of ``config`` and store the run, exactly as ``oloproof run`` does.

    :return: the :class:`~oloproof_core.runner.RunOutcome`: ``run_id``, ``state``, ``gate``,
        ``exit_code``, ``decisions``, ``summaries`` (criterion -> Summary with ``value``, ``low``,
        ``high``, ``observed``, ``missing``, ``excluded`` and the printed ``cells``), ``results``
        (each case with its execution and judgments) and ``caches``. Nothing is printed; a config
        error raises :class:`~oloproof.ConfigError`, as the CLI's exit 2. ``trials`` is ``--trials``: each
        result then holds every trial's (execution, judgments) in ``trials``, and ``units`` the
        instability and cluster figures.
    """
    from .cli import Project
    from .runner import run_suite
    from .suite import load_suite

    if refresh and reuse_executions:
        raise ValueError("refresh and reuse_executions contradict each other")
    project = Project(str(config))
    doc, skeleton = project.skeleton()
    executions = "refresh" if refresh else "reuse" if reuse_executions else None
    suite = load_suite(project.config_path, project.plugins, doc, skeleton, project.store,
                       use_cache=not no_cache, executions=executions, trials=trials)
    return run_suite(suite, project.plugins, project.store, use_cache=not no_cache)
