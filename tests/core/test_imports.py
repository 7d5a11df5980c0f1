"""What each command imports: numpy and scipy only where an interval is computed, asyncio only
where requests are sent. Structural assertions on ``python -X importtime``, never timings (the
timings are benchmarks/targets.py's)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import case, olo

HEAVY = ("numpy", "scipy")


def imported(stderr: str) -> set[str]:
    """The modules ``-X importtime`` reports (one line each, in stderr)."""
    return {m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", stderr, re.M)}


def roots(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.slow  # five commands, each a fresh interpreter
def test_commands_that_compute_no_interval_load_neither_numpy_nor_scipy(project):
    project.cases([case(1), case(2, ok=False)])
    assert project.run("run").code == 0
    run_id = json.loads(project.run("runs", "--format", "json").out)[0]["id"]
    for argv in (["--help"], ["runs"], ["plugins"], ["inspect", run_id, "--case", "c001"], ["inspect", run_id]):
        result = olo(*argv, cwd=project.root, env={"PYTHONPROFILEIMPORTTIME": "1"})
        assert result.code == 0, (argv, result)
        modules = imported(result.err)
        assert "oloproof_core.cli" in modules, argv
        assert not roots(modules) & set(HEAVY), (argv, sorted(m for m in modules if m.split(".")[0] in HEAVY))
        assert "asyncio" not in roots(modules), argv  # the http plugin imports it only to send requests
        if argv == ["plugins"]:  # every plugin loaded (importlib's own imports are not in the report)
            assert "oloproof_core.hooks.manager" in modules and "http " in result.out
        # the policy's module is a run's or a compare's; the run id's ULID is made without a package
        assert not {"oloproof_core.decisions.gate", "ulid"} & modules, argv
        if argv == ["--help"]:  # the outputs package's JSON schema is read by its function alone
            assert "importlib.resources" not in modules, argv


def test_a_run_of_a_proportion_needs_neither_numpy_nor_scipy(project):
    """Clopper-Pearson bounds come from the pure-Python beta quantile (stats.beta_quantile)."""
    project.cases([case(1), case(2, ok=False), case(3)])
    result = olo("run", cwd=project.root, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert result.code == 0, result
    assert "66.7%" in result.out and "[9.4%, 99.2%]" in result.out, result.out
    modules = imported(result.err)
    assert not roots(modules) & set(HEAVY), sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert "asyncio" not in roots(modules)  # a synchronous system's run has no event loop
    # no package is imported to make the run id (python-ulid read its version through
    # importlib.metadata, which imports the email parser)
    assert not {"ulid", "importlib.metadata", "email.parser"} & modules
    # the judges' thread pool is a run's whose judges call out (an LLM judge), not contains'
    assert "concurrent.futures" not in modules


@pytest.mark.parametrize("cases", [2, 300])
def test_a_command_exits_with_its_store_closed(project, cases):
    """The CLI collects once and freezes the rest before exiting (cli.main): the store's
    connections are closed by then (nothing holds the store: not the threads that executed the
    cases, idle between batches), so the write-ahead log is checkpointed and removed."""
    project.cases([case(i, ok=i % 2 == 0) for i in range(cases)])
    for _ in range(3):  # a new store, then one holding runs
        assert olo("run", cwd=project.root).code == 0
        assert sorted(p.name for p in (project.root / ".oloproof").iterdir()) == ["store.db"]


def test_distribution_names_and_versions_are_read_as_the_email_parser_reads_them():
    """Plugin loading and fingerprints read a distribution's name and version from the head of
    its metadata, without the email parser; the parser (importlib_metadata) is the reference."""
    import importlib_metadata

    from oloproof_core.hooks.manager import name_and_version

    checked = 0
    for dist in importlib_metadata.distributions():
        assert name_and_version(dist) == (dist.metadata["Name"], dist.metadata["Version"]), dist
        checked += 1
    assert checked > 10
    assert name_and_version(None) == ("<unknown>", "")


def test_loading_the_plugins_parses_no_email_headers(project):
    result = olo("plugins", cwd=project.root, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert result.code == 0 and "http " in result.out, result
    assert "email.parser" not in imported(result.err)
