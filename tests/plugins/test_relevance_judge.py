"""Judged relevance: the ``relevance_judge`` grades retrieved passages and, with ``relevance:
{source: judge}``, its labels stand in for ``expected.relevant`` in the retrieval metrics.

On support_rag with its relevance labels removed, replay replies written from the real labels
reproduce hit_rate_at_2 case by case; two deliberate disagreements move it by exactly those two
cases; every retrieval judgment on judged labels says ``judged``.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import olo

JUDGE = ("  - {type: relevance_judge, provider: replay, model: replay, depth: 6, "
         "provider_options: {file: replies.jsonl}}\n")


def kb(root):
    spec = importlib.util.spec_from_file_location("support_rag_app", root / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.KNOWLEDGE_BASE


def per_case(root, result) -> dict:
    run_id = result.out.split()[1]
    assert olo("export", run_id, cwd=root).code == 0
    bundle = root / ".oloproof" / "bundles" / run_id / "cases.jsonl"
    return {r["id"]: r["judgments"] for r in map(json.loads, bundle.read_text(encoding="utf-8").splitlines())}


@pytest.fixture(scope="module")
def support(tmp_path_factory):
    base = tmp_path_factory.mktemp("judged")
    root = base / "p"
    assert olo("init", "--example", "support_rag", str(root), cwd=base).code == 0
    human = olo("run", cwd=root)
    assert human.code in (0, 1, 3), human
    cases = [json.loads(line) for line in (root / "cases.jsonl").read_text(encoding="utf-8").splitlines()]
    return root, cases, per_case(root, human)


def unlabelled(root, cases, disagree=()):
    """The suite with judged relevance, its cases without labels, replies from the real labels
    (but grade 0 for the relevant documents of the cases in ``disagree``)."""
    passages = kb(root)
    replies = []
    for case in cases:
        relevant = {label["doc_id"] for label in case["expected"]["relevant"]}
        for doc_id, text in passages.items():
            grade = 2 if doc_id in relevant and case["id"] not in disagree else 0
            replies.append({"match": [case["input"]["question"], text], "grade": grade,
                            "rationale": f"{doc_id} {'answers' if grade else 'does not answer'} it"})
    (root / "replies.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replies), encoding="utf-8")
    stripped = [{**c, "expected": {k: v for k, v in c["expected"].items() if k != "relevant"}} for c in cases]
    (root / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in stripped), encoding="utf-8")
    config = (root / "oloproof.yaml").read_text(encoding="utf-8")
    if "relevance_judge" not in config:
        config = config.replace("evaluators:\n", "relevance: {source: judge, judge: judged_relevance}\nevaluators:\n" + JUDGE)
        (root / "oloproof.yaml").write_text(config, encoding="utf-8")
    result = olo("run", "--json", "out.json", cwd=root)
    assert result.code in (0, 1, 3), result
    return result, per_case(root, result), json.loads((root / "out.json").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_judged_labels_reproduce_hit_rate_and_two_disagreements_move_it_by_those_cases(support, tmp_path):
    import shutil

    root, cases, human = support
    copy = tmp_path / "p"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".oloproof"))
    result, judged, document = unlabelled(copy, cases)
    for case_id, row in judged.items():
        assert row["hit_rate_at_2"]["status"] == human[case_id]["hit_rate_at_2"]["status"], case_id
        assert row["hit_rate_at_2"]["detail"]["judged"] == "judged_relevance"
        assert row["recall_at_2"]["detail"]["judged"] == "judged_relevance"
        assert all(label["rationale"] for label in row["judged_relevance"]["detail"]["labels"])
    hit = next(m for m in document["metrics"] if m["name"] == "hit_rate_at_2")
    human_hits = sum(j["hit_rate_at_2"]["status"] == "pass" for j in human.values())
    assert hit["successes"] == human_hits and hit["observed"] == len(cases)
    assert hit["judged"] == len(cases)  # the JSON view says how many of its cases were judged
    assert "judged" in result.out  # and the table row says so

    passing = sorted(i for i, j in human.items() if j["hit_rate_at_2"]["status"] == "pass")[:2]
    _, moved, document = unlabelled(copy, cases, disagree=passing)
    changed = {i for i in moved if moved[i]["hit_rate_at_2"]["status"] != judged[i]["hit_rate_at_2"]["status"]}
    assert changed == set(passing)
    hit = next(m for m in document["metrics"] if m["name"] == "hit_rate_at_2")
    assert hit["successes"] == human_hits - 2


@pytest.mark.slow
def test_grades_are_cached_per_question_and_passage(support, tmp_path):
    import shutil

    root, cases, _ = support
    copy = tmp_path / "p"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".oloproof"))
    first, judged, _ = unlabelled(copy, cases)
    assert all(r["judged_relevance"]["detail"]["cached_passages"] == 0 for r in judged.values())
    (copy / "cases.jsonl").write_text("", encoding="utf-8")  # rewritten by unlabelled
    config = (copy / "oloproof.yaml").read_text(encoding="utf-8").replace("depth: 6", "depth: 5")
    (copy / "oloproof.yaml").write_text(config, encoding="utf-8")  # a new evaluator identity: the case misses
    _, again, _ = unlabelled(copy, cases)
    assert all(r["judged_relevance"]["detail"]["cached_passages"] == r["judged_relevance"]["detail"]["graded"]
               for r in again.values())  # but every passage grade comes from the cache


def test_grade_replies_are_read_strictly():
    from oloproof_relevance_judge import parse_grade

    assert parse_grade('{"grade": 2, "rationale": "it says 14 days"}') == (2, "it says 14 days")
    assert parse_grade('```json\n{"grade": 0}\n```') == (0, "")
    assert parse_grade('{"grade": 3}') is None
    assert parse_grade('{"grade": true}') is None
    assert parse_grade('{"grade": 1} {"grade": 2}') is None
    assert parse_grade("relevant") is None


def test_source_judge_needs_a_relevance_judge_in_the_suite(tmp_path):
    assert olo("init", "--example", "support_rag", "p", cwd=tmp_path).code == 0
    root = tmp_path / "p"
    config = (root / "oloproof.yaml").read_text(encoding="utf-8")
    (root / "oloproof.yaml").write_text(config.replace("evaluators:\n", "relevance: {source: judge}\nevaluators:\n"),
                                        encoding="utf-8")
    result = olo("run", cwd=root)
    assert result.code == 2, result
    assert "relevance.judge must name the criterion of a relevance_judge evaluator" in result.err + result.out
    (root / "oloproof.yaml").write_text(config.replace("evaluators:\n", "relevance: {source: human}\nevaluators:\n"),
                                        encoding="utf-8")
    result = olo("run", cwd=root)
    assert result.code == 2 and "relevance.source must be labels or judge" in result.err + result.out, result


def diagnosis_of(root, run_id) -> tuple[str, dict]:
    """The gold-context diagnosis of ``run_id`` on answer_correct: its printed summary, and each
    case's line of ``oloproof inspect DIAGNOSIS_ID`` (label, reason, position, evidence)."""
    result = olo("diagnose", run_id, "--intervention", "gold-context", "--criterion", "answer_correct", cwd=root)
    assert result.code == 0, result
    object_id = next(line.split()[1] for line in result.out.splitlines() if line.startswith("Diagnosis "))
    shown = olo("inspect", object_id, cwd=root)
    assert shown.code == 0, shown
    lines = {line.split(":")[0]: line for line in shown.out.splitlines() if not line.startswith((" ", "Evidence"))}
    return result.out, lines


@pytest.mark.slow
def test_diagnose_and_the_position_slice_read_judged_labels_as_they_read_human_ones(support, tmp_path):
    import shutil

    root, cases, _ = support
    listed = olo("runs", "--format", "json", cwd=root)
    assert listed.code == 0, listed
    human_id = next(r["id"] for r in json.loads(listed.out) if not r.get("parent"))
    human_out, human_lines = diagnosis_of(root, human_id)
    copy = tmp_path / "p"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".oloproof"))
    result, judged, _ = unlabelled(copy, cases)
    run_id = result.out.split()[1]
    assert "relevant_position=1 (judged)" in result.out  # the slice groups on judged labels, and says so
    assert "relevant_position=not_retrieved (judged)" in result.out
    out, lines = diagnosis_of(copy, run_id)
    assert len(lines) == len(human_lines) == 4
    for case_id, line in human_lines.items():  # the same label, reason and position, marked judged
        assert lines[case_id] == f"{line} (judged: judged_relevance)", (lines[case_id], line)
    labels = [line for line in human_out.splitlines() if line.split(":")[0] in ("RETRIEVAL_MISS", "RANKED_OUT",
                                                                                 "CONTEXT_ASSEMBLY_LOSS",
                                                                                 "GENERATION_FAILURE")]
    assert labels and all(line in out for line in labels)
    assert "Judged: the positions and evidence of 4 of 4 read the relevance labels of the LLM judge " \
           "judged_relevance" in out
    shown = olo("inspect", run_id, "--case", "refund_review", cwd=copy)
    assert shown.code == 0 and "judged: judged_relevance" in shown.out, shown
    assert "relevant at relevance_unit doc as judged by judged_relevance (an LLM judge)" in shown.out
    assert olo("export", run_id, "--html", "report.html", cwd=copy).code == 0
    page = (copy / "report.html").read_text(encoding="utf-8")  # every case page, as the viewer serves it
    assert "judged: on the relevance labels of judged_relevance (an LLM judge)" in page
    assert "relevant: as judged by judged_relevance" in page
