"""A third-party intervention, for real: `oloproof-query-rewrite` (examples/intervention_package)
installed beside Oloproof in a fresh virtualenv, and used by `oloproof diagnose --intervention
query-rewrite --option ...` on the package's demo project.

The virtualenv is built the way tests/test_third_party.py builds its own: the project installed
from a copy of its source (not editable), the plugin package installed beside it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_third_party import IGNORE, ROOT, Venv, assert_one_line_error, row

PACKAGE = ROOT / "examples" / "intervention_package"
SYNONYMS = "synonyms={money back: refunds, yearly: annual, receipts: invoices}"
SHA = r"sha256:[0-9a-f]{64}"
RUN = r"run_[0-9A-HJKMNP-TV-Z]{26}"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    base = tmp_path_factory.mktemp("third_party_intervention")
    root_copy = base / "oloproof-src"
    package_copy = base / "intervention_package"
    shutil.copytree(ROOT, root_copy, ignore=IGNORE)
    shutil.copytree(PACKAGE, package_copy, ignore=IGNORE)
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True, timeout=300)
    env = Venv(base / "venv")
    env.pip("install", str(root_copy), str(package_copy))
    return env


@pytest.fixture(scope="module")
def demo(venv: Venv, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The demo project after `oloproof run` and a gold-context diagnosis: (dir, run, diagnosis)."""
    target = tmp_path_factory.mktemp("demo") / "demo"
    shutil.copytree(PACKAGE / "demo", target, ignore=IGNORE)
    run = venv.oloproof("run", cwd=target)
    assert run.returncode == 0, run.stdout + run.stderr
    run_id = re.match(rf"Run ({RUN}) ", run.stdout).group(1)
    gold = venv.oloproof("diagnose", run_id, "--intervention", "gold-context", "--criterion", "answer_correct",
                         cwd=target)
    assert gold.returncode == 0, gold.stdout + gold.stderr
    lines = gold.stdout.splitlines()
    assert "RETRIEVAL_MISS: 2 of 3, recovered; no relevant evidence was retrieved" in lines
    assert "GENERATION_FAILURE: 1 of 3, still failed with the gold context" in lines
    # an installed plugin's intervention that confirms the implicated label is named, with its command
    assert (f"To test the RETRIEVAL_MISS cases under query-rewrite: oloproof diagnose {run_id} --intervention "
            "query-rewrite [--option KEY=VALUE ...] --criterion answer_correct") in lines
    diagnosis = re.search(rf"^Diagnosis ({SHA})$", gold.stdout, re.M).group(1)
    return target, run_id, diagnosis


@pytest.mark.slow
def test_plugins_lists_the_intervention_with_its_distribution(venv: Venv, demo: tuple[Path, str, str]) -> None:
    proc = venv.oloproof("plugins", cwd=demo[0])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert row(proc.stdout, "query-rewrite") == ["query-rewrite", "intervention query-rewrite",
                                                 "oloproof-query-rewrite 0.1.0"]


@pytest.mark.slow
def test_diagnose_with_the_installed_intervention_and_its_option(venv: Venv, demo: tuple[Path, str, str]) -> None:
    project, run_id, gold = demo
    proc = venv.oloproof("diagnose", run_id, "--intervention", "query-rewrite", "--option", SYNONYMS,
                         "--criterion", "answer_correct", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:7] == [
        "Selected: 3 failed cases with gold context (observed; no population claim)",
        "Control: 0 of 3 passed when re-executed without the intervention",
        "Recovered under query rewrite: 2 of 3",
        "Confirmed under query rewrite: 2 of 2 RETRIEVAL_MISS cases also recovered",
        f"Labels from gold context (diagnosis {gold}): 2 of 3 recovered",
        "RETRIEVAL_MISS: 2 of 3, recovered; no relevant evidence was retrieved",
        "GENERATION_FAILURE: 1 of 3, still failed with the gold context",
    ]
    assert re.fullmatch(rf"Diagnosis {SHA}", lines[7])
    assert re.fullmatch(rf"Child runs: gold context {RUN}, control {RUN}, query rewrite {RUN}, rerun control {RUN}",
                        lines[8])
    diagnosis = lines[7].split()[1]
    assert lines[9:] == [f"Cases: oloproof inspect {diagnosis}"]

    inspect = venv.oloproof("inspect", diagnosis, cwd=project)
    assert inspect.stdout.splitlines() == [
        "money_back: RETRIEVAL_MISS, relevant_not_retrieved, strength intervention_recovery, best relevant "
        "position none, recovered under query rewrite: yes",
        "receipts: RETRIEVAL_MISS, relevant_not_retrieved, strength intervention_recovery, best relevant "
        "position none, recovered under query rewrite: yes",
        "seat_count: GENERATION_FAILURE, fails_with_gold_context, strength intervention_non_recovery, best "
        "relevant position 1, recovered under query rewrite: no",
        "Evidence in the run (relevance_unit doc: positions count documents):",
        "  money_back: not retrieved",
        "  receipts: not retrieved",
        "  seat_count: in context, position 1",
    ]
    runs = venv.oloproof("runs", "--all", cwd=project).stdout  # child runs are listed with --all
    assert all(run in runs for run in re.findall(RUN, lines[8]))


@pytest.mark.slow
@pytest.mark.parametrize(("option", "expected"), [
    # the whole line docs/plugins.md prints for it
    ("synonym={yearly: annual}", re.search(r"`error: (--option synonym: [^`]+)`",
                                           (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")).group(1)),
    ("synonyms={}", "synonyms is empty; fix: pass e.g. --option 'synonyms={money back: refunds}'"),
    ("synonyms=annual", "--option synonyms: expected a mapping, got 'annual' (str)"),  # located, exit 2
])
def test_bad_options_of_the_intervention_exit_2(venv: Venv, demo: tuple[Path, str, str], option: str,
                                                expected: str) -> None:
    project, run_id, _ = demo
    line = assert_one_line_error(venv.oloproof("diagnose", run_id, "--intervention", "query-rewrite",
                                               "--option", option, "--criterion", "answer_correct", cwd=project))
    assert expected in line
    if option.startswith("synonym="):
        assert line == f"error: {expected}", line


@pytest.mark.slow
def test_a_disabled_intervention_is_named_as_disabled(venv: Venv, demo: tuple[Path, str, str]) -> None:
    project, run_id, _ = demo
    line = assert_one_line_error(venv.oloproof("diagnose", run_id, "--intervention", "query-rewrite", "--option",
                                               SYNONYMS, "--criterion", "answer_correct", cwd=project,
                                               OLOPROOF_DISABLE_PLUGINS="query-rewrite"))
    assert ("intervention 'query-rewrite' comes from plugin 'query-rewrite', which is disabled; "
            "fix: remove it from disable_plugins / OLOPROOF_DISABLE_PLUGINS") in line


def test_the_documented_package_is_the_packaged_one() -> None:
    """docs/plugins.md shows the query-rewrite package in full; keep it identical to the real files."""
    docs = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    for path in ("pyproject.toml", "oloproof_query_rewrite/__init__.py"):
        assert (PACKAGE / path).read_text(encoding="utf-8") in docs, f"docs/plugins.md is out of date: {path}"
