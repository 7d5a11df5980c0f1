"""The ``replay`` provider: judges with no key and no network, through the CLI.

A groundedness judge reads its verdicts from a replies file; the rationale says it was replayed;
a prompt no line matches is a missing judgment, never a pass; editing the file misses the
judgment cache; and ``judge validate`` runs against it offline.
"""

from __future__ import annotations

import json

import pytest

from conftest import Project

APP = '''
from oloproof import current_case, system, Context, ContextItem

PASSAGES = {"r": "Refunds for annual plans take 14 days.", "s": "Team plans include five seats.",
            "x": "Support hours are 9 to 5."}
ANSWERS = {"r": "Refunds take 14 days.", "s": "Team plans include ten seats.", "x": "Nobody knows."}


@system(name="tiny", version="1", records=("context/v1",))
def run(input):
    key = input["q"]
    current_case().context(Context(items=(ContextItem(doc_id=key, position=1, text=PASSAGES.get(key, "")),)))
    return {"answer": ANSWERS[key]}
'''
CONFIG = """
system:
  callable: app:run
cases: cases.jsonl
evaluators:
  - {type: groundedness_judge, provider: replay, model: replay, provider_options: {file: replies.jsonl}}
"""
REPLIES = [{"match": "Refunds take 14 days.", "verdict": "pass", "rationale": "the passage says 14 days"},
           {"match": ["ten seats", "five seats"], "verdict": "fail", "rationale": "five, not ten"}]


def judged(project: Project) -> dict:
    result = project.run("run")
    assert result.code == 0, result
    run_id = result.out.split()[1]
    assert project.run("export", run_id).code == 0
    bundle = project.root / ".oloproof" / "bundles" / run_id / "cases.jsonl"
    return {"out": result.out, **{r["id"]: r["judgments"]["grounded"]
                                  for r in map(json.loads, bundle.read_text(encoding="utf-8").splitlines())}}


def make(tmp_path) -> Project:
    project = Project(tmp_path)
    project.write("app.py", APP)
    project.write("oloproof.yaml", CONFIG)
    project.write("replies.jsonl", "".join(json.dumps(r) + "\n" for r in REPLIES))
    project.cases([{"id": k, "input": {"q": k}, "expected": {}} for k in ("r", "s", "x")])
    return project


@pytest.mark.slow
def test_judges_run_offline_from_a_replies_file_marked_as_not_a_model(tmp_path):
    project = make(tmp_path)
    got = judged(project)
    assert got["r"]["status"] == "pass" and got["s"]["status"] == "fail"
    assert got["r"]["detail"]["rationale"] == "replayed from replies.jsonl, not a model: the passage says 14 days"
    assert got["x"]["status"] == "missing" and got["x"]["reason"] == "judge_unparseable"  # no line matched
    assert "Cache: execution 0 hit/3 miss; judgment 0 hit/3 miss" in got["out"]

    again = judged(project)
    assert "judgment 2 hit/1 miss" in again["out"]  # the missing judgment is asked again, never cached
    project.write("replies.jsonl", "".join(json.dumps(r) + "\n" for r in REPLIES[:1]) + json.dumps(
        {"match": "ten seats", "verdict": "pass"}) + "\n")
    edited = judged(project)
    assert "judgment 0 hit/3 miss" in edited["out"]  # the file is part of the judge's identity
    assert edited["s"]["status"] == "pass"


@pytest.mark.slow
def test_a_default_verdict_and_validation_without_a_key(tmp_path):
    project = make(tmp_path)
    project.write("oloproof.yaml", CONFIG.replace("{file: replies.jsonl}", "{file: replies.jsonl, default: fail}"))
    got = judged(project)
    assert got["x"]["status"] == "fail" and "no line matched" in got["x"]["detail"]["rationale"]
    project.write("labels.jsonl", '{"id": "r", "label": true}\n{"id": "s", "label": false}\n{"id": "x", "label": false}\n')
    validated = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "grounded")
    assert validated.code == 0, validated  # no policy here, so no requirement to meet
    assert "groundedness_judge · replay · replay" in validated.out
    assert "Labels: labels.jsonl · 3 labelled · 3 compared · 0 not judged" in validated.out


def test_a_malformed_replies_file_is_a_located_error(tmp_path):
    project = make(tmp_path)
    project.write("replies.jsonl", '{"match": "a", "verdict": "pass"}\n{"match": "b", "verdict": "maybe"}\n')
    result = project.run("run")
    assert result.code == 2, result
    assert "replies.jsonl:2" in result.err and "verdict" in result.err
    assert not (project.root / ".oloproof" / "store.db").exists() or not project.runs()
