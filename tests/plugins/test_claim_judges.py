"""Claim-level judges on the support_rag example, offline through the replay provider:
``claims_judge`` (the answer's claims against the context, each with its verdict and supporting
passage) and ``context_recall_judge`` (the reference answer's claims against the context).

The replies plant one unsupported claim of an answer (seat_count), an abstention with no claims
(money_back), and reference claims the context lacks (refund_review, money_back, one of
seat_count's two); the verdicts must show in the JSON bundle, ``inspect --case``, the case page
and JUnit's per-case output, and every claim verdict is cached per (claim, context, judge).
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import olo

JUDGES = ("  - {type: claims_judge, provider: replay, model: replay, provider_options: {file: replies.jsonl}}\n"
          "  - {type: context_recall_judge, provider: replay, model: replay, threshold: THRESHOLD, "
          "provider_options: {file: replies.jsonl}}\n")
CONTEXT = {"refund_annual": "kb-01", "seat_count": "kb-03", "free_trial": "kb-15"}  # a passage each one's context holds


def replies(cases: list[dict]) -> list[dict]:
    rows = []
    for case in cases:
        cid, question = case["id"], case["input"]["question"]
        passage = CONTEXT.get(cid)
        answer = [] if cid == "money_back" else [f"{cid} claim one", f"{cid} claim two"]
        rows.append({"match": [question, "Split the answer into its claims"], "claims": answer})
        for claim in answer:
            ok = not (cid == "seat_count" and claim.endswith("two"))
            rows.append({"match": [claim], "verdict": "pass" if ok else "fail", "rationale": f"{claim} checked",
                         **({"passage": passage} if ok and passage else {})})
        reference = [f"{cid} reference one"] + ([f"{cid} reference two"] if cid == "seat_count" else [])
        rows.append({"match": [question, "Split the reference answer into its claims"], "claims": reference})
        for claim in reference:
            ok = cid not in ("refund_review", "money_back") and claim != "seat_count reference two"
            rows.append({"match": [claim], "verdict": "pass" if ok else "fail", "rationale": f"{claim} checked"})
    return rows


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    base = tmp_path_factory.mktemp("claims")
    assert olo("init", "--example", "support_rag", "p", cwd=base).code == 0
    root = base / "p"
    cases = [json.loads(line) for line in (root / "cases.jsonl").read_text(encoding="utf-8").splitlines()]
    (root / "replies.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replies(cases)), encoding="utf-8")
    config = (root / "oloproof.yaml").read_text(encoding="utf-8")
    (root / "oloproof.yaml").write_text(config.replace("evaluators:\n", "evaluators:\n" + JUDGES.replace(
        "THRESHOLD", "0.75")), encoding="utf-8")
    result = olo("run", "--json", "out.json", "--junit", "junit.xml", "--junit-cases", cwd=root)
    assert result.code in (0, 1, 3), result
    run_id = re.search(r"run_[0-9A-Z]{26}", result.out).group(0)
    assert olo("export", run_id, cwd=root).code == 0
    bundle = root / ".oloproof" / "bundles" / run_id / "cases.jsonl"
    judged = {r["id"]: r["judgments"] for r in map(json.loads, bundle.read_text(encoding="utf-8").splitlines())}
    return root, run_id, judged, result


@pytest.mark.slow
def test_each_claim_has_its_verdict_and_supporting_passage_in_the_json_bundle(project):
    _, _, judged, result = project
    seat = judged["seat_count"]["claims_supported"]
    assert seat["status"] == "score" and seat["value"] == 0.5  # the share of supported claims
    assert seat["reason"] == "1 of 2 claims of the answer supported"
    assert [(c["claim"], c["verdict"], c["passage"]) for c in seat["detail"]["claims"]] == [
        ("seat_count claim one", "supported", "kb-03"), ("seat_count claim two", "unsupported", None)]
    assert judged["refund_annual"]["claims_supported"]["status"] == "pass"  # every claim supported
    assert judged["refund_annual"]["claims_supported"]["detail"]["claims"][0]["passage"] == "kb-01"
    # a passage the context does not hold is not recorded as the support
    assert judged["encryption"]["claims_supported"]["detail"]["claims"][0]["passage"] is None
    assert judged["money_back"]["claims_supported"]["status"] == "pass"  # an abstention makes no claim
    assert judged["money_back"]["claims_supported"]["reason"] == "no_claims"
    document = json.loads((project[0] / "out.json").read_text(encoding="utf-8"))
    metric = next(m for m in document["metrics"] if m["name"] == "claims_supported")
    assert metric["observed"] == 13 and metric["metric"] == "mean"
    assert abs(metric["estimate"] - 12.5 / 13) < 1e-9


@pytest.mark.slow
def test_context_recall_counts_the_reference_claims_the_context_supports(project):
    _, _, judged, _ = project
    recall = {i: j["context_recall"] for i, j in judged.items()}
    assert recall["refund_review"]["status"] == "fail"
    assert recall["refund_review"]["reason"] == "0 of 1 claims of the reference answer supported"
    assert recall["seat_count"]["status"] == "fail"  # 1 of 2 is below the threshold 0.75
    assert recall["seat_count"]["detail"]["fraction"] == 0.5
    assert recall["seat_count"]["reason"] == "1 of 2 claims of the reference answer supported"
    assert recall["money_back"]["status"] == "fail"  # an empty context supports nothing, without asking
    assert recall["money_back"]["detail"]["claims"][0]["rationale"] == "the context holds no passage"
    assert sorted(i for i, j in recall.items() if j["status"] == "pass") == sorted(
        set(recall) - {"refund_review", "seat_count", "money_back"})


@pytest.mark.slow
def test_claim_verdicts_show_in_inspect_the_case_page_and_junit(project):
    root, run_id, _, _ = project
    shown = olo("inspect", run_id, "--case", "seat_count", cwd=root)
    assert shown.code == 0, shown
    assert "- supported by kb-03: seat_count claim one" in shown.out
    assert "- unsupported: seat_count claim two" in shown.out
    assert "summary: 1 of 2 claims of the answer supported" in shown.out
    assert olo("export", run_id, "--html", "report.html", cwd=root).code == 0
    page = (root / "report.html").read_text(encoding="utf-8")
    assert re.search(r'<table class="claims">.*?<td>seat_count claim one</td><td class="passed">supported</td>'
                     r'<td>kb-03</td>', page, re.S)
    assert re.search(r'<td>seat_count claim two</td><td class="failed">unsupported</td><td></td>', page)
    import xml.etree.ElementTree as ET

    cases = {c.get("name"): c for c in ET.parse(root / "junit.xml").iter("testcase")}
    out = cases["seat_count · claims_supported"].find("system-out").text
    assert out.splitlines() == ["score 0.500", "1 of 2 claims of the answer supported",
                                "supported (kb-03): seat_count claim one", "unsupported: seat_count claim two"]
    failed = cases["refund_review · context_recall"]
    assert failed.find("failure") is not None
    assert failed.find("system-out").text.splitlines()[-1] == "unsupported: refund_review reference one"


@pytest.mark.slow
def test_claim_verdicts_are_cached_per_claim_and_context(project, tmp_path):
    import shutil

    root = tmp_path / "p"
    shutil.copytree(project[0], root)
    config = (root / "oloproof.yaml").read_text(encoding="utf-8").replace("threshold: 0.75", "threshold: 0.5")
    (root / "oloproof.yaml").write_text(config, encoding="utf-8")  # a new evaluator: each case misses
    result = olo("run", cwd=root)
    assert result.code in (0, 1, 3), result
    run_id = re.search(r"run_[0-9A-Z]{26}", result.out).group(0)
    assert olo("export", run_id, cwd=root).code == 0
    rows = map(json.loads, (root / ".oloproof" / "bundles" / run_id / "cases.jsonl").read_text().splitlines())
    recall = {r["id"]: r["judgments"]["context_recall"] for r in rows}
    assert recall["seat_count"]["status"] == "pass"  # 1 of 2 meets 0.5
    # but the split and every claim's verdict come from the cache
    asked = {i: 1 + sum(c["rationale"] != "the context holds no passage" for c in j["detail"]["claims"])
             for i, j in recall.items()}
    assert all(j["detail"]["cached_calls"] == asked[i] for i, j in recall.items())
    assert asked["money_back"] == 1 and asked["seat_count"] == 3


def test_claim_replies_are_read_strictly():
    from oloproof import ClaimJudge  # noqa: F401  (the public base of both judges)
    from oloproof_core.engine.claims import _claim_verdict, parse_claims

    assert parse_claims('{"claims": ["a", " b  c "]}') == ["a", "b c"]
    assert parse_claims('```json\n{"claims": []}\n```') == []
    assert parse_claims('{"claims": "a"}') is None
    assert parse_claims('{"claims": [1]}') is None
    assert parse_claims('{"claims": ["a"]} {"claims": ["b"]}') is None
    assert _claim_verdict('{"verdict": "pass", "passage": "[kb-03]"}')["passage"] == "kb-03"
    assert _claim_verdict('{"verdict": "maybe"}') is None


def test_a_bad_threshold_is_refused_with_its_place(tmp_path):
    assert olo("init", "--example", "support_rag", "p", cwd=tmp_path).code == 0
    root = tmp_path / "p"
    (root / "replies.jsonl").write_text("", encoding="utf-8")
    config = (root / "oloproof.yaml").read_text(encoding="utf-8")
    (root / "oloproof.yaml").write_text(config.replace("evaluators:\n", "evaluators:\n" + JUDGES.replace(
        "THRESHOLD", "1.5")), encoding="utf-8")
    result = olo("run", cwd=root)
    assert result.code == 2, result
    assert "threshold must be a number above 0 and at most 1, got 1.5" in result.err + result.out
    assert "oloproof.yaml:" in result.err + result.out


# -- against the local OpenAI/Anthropic-compatible stand-in -------------------------------------


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_the_claim_judges_ask_a_provider_once_to_split_and_once_a_claim(wire, monkeypatch):
    from provider_standin import StandIn, verdict

    from oloproof import Case, Execution
    from oloproof_claims_judge import ClaimsJudge, Options
    from oloproof_context_recall_judge import ContextRecallJudge, Options as RecallOptions

    monkeypatch.setenv("OLO_JUDGE_KEY", "sk-standin-claims")
    case = Case(id="c1", input={"question": "How long do refunds take?"}, expected={"answer": "14 days, by card"})
    items = [{"doc_id": "kb-1", "chunk_id": "2", "position": 1, "text": "Refunds for annual plans take 14 days."}]
    done = Execution(output={"answer": "Refunds take 14 days. They are free."},
                     artifacts={"context/v1": ({"items": items, "dropped": [], "token_budget": None,
                                                "source": "retrieval"},)})
    with StandIn(key="sk-standin-claims") as standin:
        standin.rules += [
            ("Split the answer into its claims", json.dumps({"claims": ["Refunds take 14 days.", "Refunds are free."]})),
            ("Split the reference answer", json.dumps({"claims": ["Refunds take 14 days.", "Refunds go to the card."]})),
            ("Claim:\nRefunds take 14 days.", json.dumps({"verdict": "pass", "passage": "kb-1#2", "rationale": "kb-1"})),
            ("Claim of the reference answer:\nRefunds take 14 days.", json.dumps({"verdict": "pass", "passage": "kb-1#2"})),
            ("Refunds are free.", verdict("fail", "no passage says so")),
            ("Refunds go to the card.", verdict("fail", "no passage says so"))]
        url = standin.openai_url if wire == "openai" else standin.anthropic_url
        common = {"provider": wire, "model": "judge-1",
                  "provider_options": {"base_url": url, "api_key_env": "OLO_JUDGE_KEY", "backoff": 0.0}}
        judge = ClaimsJudge(Options(**common))
        got = judge.evaluate(case, done)
        assert len(standin.requests) == 3  # the split, then one a claim
        assert "[kb-1#2] Refunds for annual plans take 14 days." in standin.requests[-1]["prompt"]
        assert (got.status, got.value, got.reason) == ("score", 0.5, "1 of 2 claims of the answer supported")
        assert got.detail["claims"] == [
            {"claim": "Refunds take 14 days.", "verdict": "supported", "passage": "kb-1#2", "rationale": "kb-1"},
            {"claim": "Refunds are free.", "verdict": "unsupported", "passage": None, "rationale": "no passage says so"}]
        # every call counted: the run's usage line says 3 calls, not one a judgment
        assert got.detail["usage"] == {"input_tokens": 300, "output_tokens": 60, "calls": 3}
        assert judge.identity["prompt_version"] == "claims/v1" and "split_prompt_sha256" in judge.identity
        strict = ClaimsJudge(Options(**common, threshold=1.0))
        assert strict.metric == "proportion" and strict.evaluate(case, done).status == "fail"
        recall = ContextRecallJudge(RecallOptions(**common, threshold=0.5)).evaluate(case, done)
        assert (recall.status, recall.reason) == ("pass", "1 of 2 claims of the reference answer supported")
        standin.rules.insert(0, ("Split the answer into its claims", "Claims: refunds take 14 days."))
        broken = judge.evaluate(case, done)  # an unreadable split is missing, never a verdict
        assert (broken.status, broken.reason, broken.detail["step"]) == ("missing", "judge_unparseable", "split")
        assert broken.detail["usage"]["calls"] == 1  # an unreadable reply was paid for: counted
        assert ContextRecallJudge(RecallOptions(**common)).exclude(
            Case(id="c2", input={"question": "q"}, expected={})) == "no_reference_answer"


def test_a_gate_on_a_judge_s_share_is_refused_and_on_its_threshold_allowed(tmp_path):
    assert olo("init", "--example", "support_rag", "p", cwd=tmp_path).code == 0
    root = tmp_path / "p"
    (root / "replies.jsonl").write_text("", encoding="utf-8")
    config = (root / "oloproof.yaml").read_text(encoding="utf-8")
    (root / "oloproof.yaml").write_text(config.replace("evaluators:\n", "evaluators:\n" + JUDGES.split("\n")[0] + "\n"),
                                        encoding="utf-8")
    policy = (root / "policy.yaml").read_text(encoding="utf-8")
    (root / "policy.yaml").write_text(policy + "  - {id: grounded-claims, metric: claims_supported, min: 0.9}\n",
                                      encoding="utf-8")
    result = olo("run", cwd=root)
    assert result.code == 2, result
    said = result.err + result.out
    assert "rule 'grounded-claims' gates on claims_supported, an LLM judge's share" in said
    assert "policy.yaml:" in said and "threshold: 1.0" in said
    (root / "oloproof.yaml").write_text(config.replace("evaluators:\n", "evaluators:\n" + JUDGES.split("\n")[0].replace(
        "model: replay,", "model: replay, threshold: 1.0,") + "\n"), encoding="utf-8")
    result = olo("run", cwd=root)
    assert result.code != 2, result  # pass/fail verdicts: the rule waits for validation like any judge's
