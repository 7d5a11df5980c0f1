"""``system.http.interventions``: a service that takes a context, a top-k or a budget override is
diagnosed like a staged system, against the example's real server on 127.0.0.1."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import Project, olo
from test_http import EXAMPLE, example_server, http_case, http_config  # noqa: F401 - a fixture

DIAGNOSES = [("gold-context",), ("top-k", "--top-k", "4"), ("token-budget", "--token-budget", "120")]


def labels(project: Project, out: str) -> list[str]:
    """The diagnosis's summary lines from its labels on, and each case's line in inspect, without ids."""
    object_id = re.search(r"Diagnosis (sha256:\w+)", out).group(1)
    keep = [line for line in out.splitlines() if not line.startswith(("Diagnosis", "Child runs", "Cases", "To test",
                                                                       "Labels from"))]
    inspected = project.run("inspect", object_id)
    assert inspected.code == 0, inspected
    return keep + inspected.out.splitlines()


@pytest.mark.slow  # two runs and six diagnoses, half of them over HTTP
def test_blackbox_over_http_gets_the_labels_of_its_staged_twin(tmp_path, example_server):  # noqa: F811
    folder = tmp_path / "blackbox_rag"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__", ".oloproof"))
    config = folder / "oloproof.http.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("http://127.0.0.1:8766/answer", example_server.url),
                      encoding="utf-8")
    service = Project(folder)
    assert service.run("run", "--config", "oloproof.http.yaml").code == 1
    assert olo("init", "--example", "support_rag", "staged", cwd=tmp_path).code == 0
    staged = Project(tmp_path / "staged")
    shutil.copy(folder / "cases.jsonl", staged.root / "cases.jsonl")  # the same fifteen cases
    assert staged.run("run").code == 3
    for args in DIAGNOSES:
        over_http = service.run("diagnose", "latest", "--intervention", *args, "--criterion", "answer_correct")
        in_stages = staged.run("diagnose", "latest", "--intervention", *args, "--criterion", "answer_correct")
        assert over_http.code == in_stages.code == 0, (over_http, in_stages)
        assert "not staged" not in over_http.out, over_http
        assert labels(service, over_http.out) == labels(staged, in_stages.out), (over_http, in_stages)
    # the gold passages really went to the service: its gold-context child recorded them as its context
    first = labels(service, service.run("diagnose", "latest", "--intervention", "gold-context",
                                        "--criterion", "answer_correct").out)
    assert "money_back: RETRIEVAL_MISS, relevant_not_retrieved, strength intervention_recovery, " \
           "best relevant position none" in first


@pytest.mark.parametrize(("interventions", "expected"), [
    ("{contxt: override.passages}", "interventions.contxt: unknown setting 'contxt'; a service can take context, "
                                    "top_k, token_budget; fix: rename it to 'context'"),
    ("{top_k: 'header:X Top'}", "interventions.top_k: 'X Top' is not a header name; fix: write "
                                "interventions.top_k: header:X-Top-K"),
    ("{context: override..passages}", "interventions.context: 'override..passages' has an empty part"),
])
def test_a_wrong_place_stops_the_run_with_its_fix(tmp_path, interventions, expected):
    project = Project(tmp_path)
    project.write("oloproof.yaml", http_config("http://127.0.0.1:9/answer", f"    interventions: {interventions}\n"))
    project.cases([http_case("c1")])
    result = project.run("run")
    assert result.code == 2 and expected in result.err and "$.system.http" in result.err, result
    assert not (tmp_path / ".oloproof").exists() or project.runs() == []


@pytest.mark.slow  # two commands against the example server
def test_a_service_without_the_override_is_not_re_executed(tmp_path, example_server):  # noqa: F811
    """Only the settings a service declares are sent: a top-k on a service that takes a context only is
    unsupported, and nothing is re-executed."""
    folder = tmp_path / "blackbox_rag"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__", ".oloproof"))
    config = folder / "oloproof.http.yaml"
    text = config.read_text(encoding="utf-8").replace("http://127.0.0.1:8766/answer", example_server.url)
    config.write_text(re.sub(r"      top_k: .*\n", "", text), encoding="utf-8")
    project = Project(folder)
    assert project.run("run", "--config", "oloproof.http.yaml", "--limit", "4").code in (1, 3)
    before = project.runs()
    result = project.run("diagnose", "latest", "--intervention", "top-k", "--top-k", "4", "--criterion", "answer_correct")
    assert result.code == 0 and "Child runs" not in result.out, result
    assert ("UNRESOLVED: 2 of 2, the service does not declare where its request takes this intervention's override "
            "(system.http.interventions), so no case was re-executed") in result.out, result
    assert project.runs() == before
