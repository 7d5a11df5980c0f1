"""Running a suite from Python (a notebook, a script): the same engine and records as the CLI."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def run(config: str | Path = "oloproof.yaml", *, no_cache: bool = False, refresh: bool = False,
        reuse_executions: bool = False, limit: int | None = None, filters: Sequence[str] = (),
        sample: int | None = None, seed: int | None = None, trials: int | None = None,
        until_decided: bool = False, batch: int | None = None) -> Any:
    """Run the suite of ``config`` and store the run, exactly as ``oloproof run`` does.

    ``limit``, ``filters`` (``["metadata.topic=billing"]``, ANDed), ``sample`` and ``seed`` select a
    subset of the cases as ``--limit``, ``--filter``, ``--sample`` and ``--seed`` do. A sequential
    run (``until_decided``, or the policy's ``sequential.until_decided``) stops when the gate is
    decided, as ``--until-decided`` does: ``seed`` and ``batch`` then set its order and its looks,
    and a re-run of the same suite in another order warns on standard error.

    :return: the :class:`~oloproof_core.runner.RunOutcome`: ``run_id``, ``state``, ``gate``,
        ``exit_code``, ``decisions``, ``summaries`` (criterion -> Summary with ``value``, ``low``,
        ``high``, ``observed``, ``missing``, ``excluded`` and the printed ``cells``), ``tally`` (the
        counts the report prints: cases without an output and why, reasons of missing and excluded
        judgments; the case records themselves are in the store, as runs stream),
        ``header`` (with ``selection`` for a subset) and ``caches``. Nothing is printed (but the
        one-line warning of a re-ordered sequential run, on standard error); a config
        error raises :class:`~oloproof.ConfigError`, as the CLI's exit 2. ``trials`` is
        ``--trials``: ``tally.trials`` then holds each case's trial judgments, and ``units`` the
        instability and cluster figures.
    """
    from oloproof_core.workflows.project import Project
    from oloproof_core.engine.runner import run_suite
    from oloproof_core.config.selection import Selection, select_suite
    from oloproof_core.engine.sequential import plan
    from oloproof_core.engine.suite import load_suite

    if refresh and reuse_executions:
        raise ValueError("refresh and reuse_executions contradict each other")
    if isinstance(filters, str):
        filters = [filters]
    project = Project(str(config))
    doc, skeleton = project.skeleton()
    executions = "refresh" if refresh else "reuse" if reuse_executions else None
    suite = load_suite(project.config_path, project.plugins, doc, skeleton, project.store,
                       use_cache=not no_cache, executions=executions, trials=trials)
    suite, selection = select_suite(suite, Selection(limit=limit, filters=tuple(filters), sample=sample, seed=seed))
    # the policy's sequential settings as the command line reads them (cli/run.py)
    sequential = plan(suite, until_decided, seed if until_decided or sample is None else None, batch)
    return run_suite(suite, project.plugins, project.store, use_cache=not no_cache, sequential=sequential,
                     selection=selection)


def evaluate(config: str | Path = "oloproof.yaml", **options: Any) -> dict:
    """:func:`run`, returning the stored run as data: the ``oloproof.run`` document that
    ``oloproof run --json FILE`` writes (``run``, ``gate``, ``metrics`` with ``estimate``, ``low``,
    ``high`` and the printed ``display`` cells, ``decisions``, ``missing``, ...), plain dicts and
    lists, ready for a data frame. The options are :func:`run`'s."""
    from oloproof_core.workflows.project import Project
    from oloproof_core.results.view import run_view

    outcome = run(config, **options)
    store = Project(str(config)).reader()
    header, summary = store.get_run(outcome.run_id)
    return run_view(header, summary, store.run_cases(outcome.run_id))
