"""The LLM judges (groundedness, citation support, rubric, exact) against the local provider
stand-in: prompts, verdicts, unparseable replies, faults, keys, cache identity, usage, and the
rule that a judge gates only after a validation of exactly that judge."""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import olo
from provider_standin import Fault, StandIn, verdict

from oloproof import EvaluationError, Execution, Judgment
from oloproof import Case
from oloproof_core.engine.providers import parse_verdict

KEY = "sk-standin-judge-7d41aa"


@pytest.fixture
def standin():
    with StandIn(key=KEY) as server:
        server.rules += [("UNSUPPORTED", verdict("fail", "the answer adds a claim")), ("GARBLE", "I think it is fine.")]
        yield server


@pytest.fixture(autouse=True)
def key_env(monkeypatch):
    monkeypatch.setenv("OLO_JUDGE_KEY", KEY)


def provider(standin: StandIn, wire: str = "openai") -> dict:
    url = standin.openai_url if wire == "openai" else standin.anthropic_url
    return {"provider": wire, "model": "judge-1",
            "provider_options": {"base_url": url, "api_key_env": "OLO_JUDGE_KEY", "backoff": 0.0}}


def execution(answer: str = "Refunds take 14 days.", context=("kb-1",), cited=None, texts=True) -> Execution:
    passages = {"kb-1": "Refunds for annual plans take 14 days.", "kb-2": "Invoices are PDF files."}
    items = [{"doc_id": d, "position": i, **({"text": passages[d]} if texts else {})} for i, d in enumerate(context, 1)]
    artifacts = {"context/v1": ({"items": items, "dropped": [], "token_budget": None, "source": "retrieval"},)}
    if cited is not None:
        artifacts["citations/v1"] = ({"ids": list(cited)},)
    return Execution(output={"answer": answer}, artifacts=artifacts)


CASE = Case(id="c1", input={"question": "How long do refunds take?"}, expected={"answer": "14 days"})


def make(name: str, standin: StandIn, wire: str = "openai", **options):
    import importlib

    module = importlib.import_module(f"oloproof_{name}")
    judge = {"groundedness_judge": "GroundednessJudge", "citation_support_judge": "CitationSupportJudge",
             "rubric_judge": "RubricJudge", "exact_judge": "ExactJudge"}[name]
    return getattr(module, judge)(module.Options(**{**provider(standin, wire), **options}))


# -- the verdict contract ------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "parsed"), [
    ('{"verdict": "pass", "rationale": "All supported."}', ("pass", "All supported.")),
    ('```json\n{"verdict": "FAIL", "rationale": "x"}\n```', ("fail", "x")),
    ('Let me think.\n{"verdict": "fail", "rationale": "a  claim\nis missing"} Done.', ("fail", "a claim is missing")),
    ('{"verdict": "pass"}', ("pass", "")),
    ('{"verdict": "pass"} {"verdict": "pass", "rationale": "again"}', ("pass", "")),
    ('{"verdict": "pass"} {"verdict": "fail"}', None),  # two answers: ambiguous, never a silent pick
    ('{"verdict": "yes", "rationale": "x"}', None),
    ('{"verdict": true}', None),
    ('{"rationale": "no verdict"}', None),
    ("PASS", None),
    ('{"verdict": "pass", "rationale": ', None),
    ("", None),
])
def test_parse_verdict(text, parsed):
    assert parse_verdict(text) == parsed


def test_a_long_rationale_is_cut():
    verdict_, rationale = parse_verdict(json.dumps({"verdict": "pass", "rationale": "word " * 400}))
    assert verdict_ == "pass" and len(rationale) == 500 and rationale.endswith("…")


# -- each judge, in process ----------------------------------------------------------------------


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_groundedness_asks_about_the_passages_and_records_the_verdict(wire, standin):
    judge = make("groundedness_judge", standin, wire)
    assert (judge.judge, judge.concurrent, judge.reads, judge.criterion) == (True, True, ("context/v1",), "grounded")
    got = judge.evaluate(CASE, execution())
    assert got.status == "pass"
    assert got.detail == {"verdict": "pass", "rationale": "stand-in rationale", "prompt_version": "groundedness/v1",
                          "usage": {"input_tokens": 100, "output_tokens": 20}}
    request = standin.requests[-1]
    assert "How long do refunds take?" in request["prompt"]
    assert "[1] (kb-1) Refunds for annual plans take 14 days." in request["prompt"]
    assert "Refunds take 14 days." in request["prompt"]
    assert "supported by the context passages" in request["system"]
    got = judge.evaluate(CASE, execution(answer="Refunds take 14 days. UNSUPPORTED: and are free."))
    assert (got.status, got.detail["rationale"]) == ("fail", "the answer adds a claim")


def test_an_unparseable_verdict_is_missing_with_the_raw_reply_kept(standin):
    got = make("groundedness_judge", standin).evaluate(CASE, execution(answer="GARBLE"))
    assert got.status == "missing" and got.reason == "judge_unparseable"
    assert got.detail["raw"] == "I think it is fine."
    assert got.detail["usage"] == {"input_tokens": 100, "output_tokens": 20}  # the call was paid for


def test_groundedness_without_a_context_to_read_asks_nothing(standin):
    judge = make("groundedness_judge", standin)
    assert judge.evaluate(CASE, Execution(output={"answer": "x"})) == Judgment.missing("no_context_recorded")
    assert judge.evaluate(CASE, execution(texts=False)) == Judgment.missing("context_without_text")
    assert judge.evaluate(CASE, Execution(output={"other": 1}, artifacts=execution().artifacts)) == \
        Judgment.failed("field_absent")
    assert standin.requests == []
    assert judge.evaluate(CASE, execution(context=())).status == "pass"
    assert "(no passages)" in standin.requests[-1]["prompt"]


def test_citation_support_shows_the_cited_passages_only(standin):
    judge = make("citation_support_judge", standin, "anthropic")
    assert judge.reads == ("citations/v1", "context/v1") and judge.criterion == "citations_supported"
    got = judge.evaluate(CASE, execution(context=("kb-1", "kb-2"), cited=["kb-1"]))
    assert got.status == "pass" and got.detail["cited"] == ["kb-1"]
    prompt = standin.requests[-1]["prompt"]
    assert "[kb-1] Refunds for annual plans take 14 days." in prompt and "Invoices" not in prompt
    assert judge.evaluate(CASE, execution(cited=[])) == Judgment.excluded("no_citations")
    assert judge.evaluate(CASE, execution(cited=["kb-9"])) == Judgment.failed("cites_outside_context",
                                                                              invalid=["kb-9"])
    assert judge.evaluate(CASE, execution()) == Judgment.missing("no_citations_recorded")
    assert len(standin.requests) == 1


def test_rubric_judge_shows_the_rubric_and_an_optional_reference(standin):
    judge = make("rubric_judge", standin, criterion="says_how_long", rubric="The answer says how long it takes.")
    assert judge.criterion == "says_how_long" and judge.exclude(CASE) is None
    assert judge.evaluate(CASE, execution()).status == "pass"
    prompt = standin.requests[-1]["prompt"]
    assert "Rubric:\nThe answer says how long it takes." in prompt and "Reference answer" not in prompt
    judge = make("rubric_judge", standin, criterion="c", rubric="r", expected_field="answer")
    judge.evaluate(CASE, execution())
    assert "Reference answer:\n14 days" in standin.requests[-1]["prompt"]
    assert judge.exclude(Case(id="c2", input={"question": "q"})) == "no_expected_value"


def test_exact_judge_compares_with_the_expected_answer(standin):
    judge = make("exact_judge", standin)
    assert judge.criterion == "answer_equivalent" and judge.exclude(CASE) is None
    assert judge.exclude(Case(id="c2", input={"question": "q"})) == "no_expected_value"
    assert judge.evaluate(CASE, execution(answer="Two weeks.")).status == "pass"
    prompt = standin.requests[-1]["prompt"]
    assert "Reference answer:\n14 days" in prompt and "Answer:\nTwo weeks." in prompt


def test_a_provider_fault_surfaces_as_an_evaluation_error(standin):
    standin.faults.extend([Fault(500)] * 2)
    judge = make("exact_judge", standin, provider_options={**provider(standin)["provider_options"], "retries": 1})
    with pytest.raises(EvaluationError, match="^provider_error: 500$"):
        judge.evaluate(CASE, execution())


def test_the_identity_names_the_prompt_version_provider_and_model(standin):
    from oloproof import ConfigError

    judge = make("groundedness_judge", standin, "anthropic")
    assert judge.identity["prompt_version"] == "groundedness/v1"
    assert (judge.identity["provider"], judge.identity["model"]) == ("anthropic", "judge-1")
    assert len(judge.identity["prompt_sha256"]) == 64
    plugin = judge.identity["provider_plugin"]  # the provider's distribution, version and code
    assert plugin["distribution"] == "oloproof" and plugin["version"] and plugin["code"]
    with pytest.raises(ConfigError, match="groundedness_judge has no prompt 'v9'"):
        make("groundedness_judge", standin, prompt="v9")


# -- end to end, from YAML -----------------------------------------------------------------------

APP = '''
from pathlib import Path

from oloproof import Context, ContextItem, current_case, system

PASSAGES = {"kb-1": "Refunds for annual plans take 14 days.", "kb-2": "Invoices are PDF files.",
            "kb-3": "Team plans include five seats."}


@system(name="rag", version="1", records=("context/v1", "citations/v1"))
def run(case):
    with open("executed.log", "a") as log:
        log.write(case["question"] + "\\n")
    recorder = current_case()
    recorder.context(Context(items=tuple(ContextItem(doc_id=d, position=i, text=PASSAGES[d])
                                         for i, d in enumerate(case["docs"], 1))))
    recorder.citations(case["cite"])
    return {"answer": case["answer"]}
'''


def judged_project(tmp_path, standin: StandIn, wire: str = "openai", *, model: str = "judge-1", policy: str = "",
                   cases: list[dict] | None = None, extra: str = "") -> None:
    url = standin.openai_url if wire == "openai" else standin.anthropic_url
    (tmp_path / "app.py").write_text(APP, encoding="utf-8")
    rows = cases or [
        {"id": "c1", "input": {"question": "How long do refunds take?", "answer": "14 days.", "docs": ["kb-1"],
                               "cite": ["kb-1"]}, "expected": {"answer": "14 days"}},
        {"id": "c2", "input": {"question": "How are invoices sent?", "answer": "As PDF. UNSUPPORTED by email.",
                               "docs": ["kb-2"], "cite": ["kb-2"]}, "expected": {"answer": "PDF files"}},
        {"id": "c3", "input": {"question": "How many seats?", "answer": "GARBLE", "docs": ["kb-3"], "cite": []},
         "expected": {}},
    ]
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "oloproof.yaml").write_text(f"""
system:
  name: rag
  version: "1"
  callable: app:run
cases: cases.jsonl
evaluators:
  - type: groundedness_judge
    provider: {wire}
    model: {model}
    provider_options: &llm
      base_url: "{url}"
      api_key_env: OLO_JUDGE_KEY
      backoff: 0.0
      price_per_million_input_tokens: 1.0
      price_per_million_output_tokens: 5.0
  - {{type: citation_support_judge, provider: {wire}, model: {model}, provider_options: *llm}}
  - {{type: rubric_judge, criterion: concise, rubric: "At most two sentences.", provider: {wire}, model: {model},
      provider_options: *llm}}
  - {{type: exact_judge, provider: {wire}, model: {model}, provider_options: *llm}}
{extra}{policy}""", encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_every_judge_runs_from_yaml_cached_with_usage_in_the_summary(wire, standin, tmp_path):
    judged_project(tmp_path, standin, wire)
    first = olo("run", cwd=tmp_path)
    assert first.code == 0, first
    assert {r["wire"] for r in standin.requests} == {wire}
    lines = first.out.splitlines()
    row = {line.split("│")[1].strip(): line.split("│")[4].strip() for line in lines if line.startswith("│ ")}
    assert row["grounded"] == "1 / 2 observed · 1 missing · 0 excluded"  # c3's reply was unparseable
    assert row["citations_supported"] == "1 / 2 observed · 0 missing · 1 excluded"  # c3 cites nothing
    assert row["answer_equivalent"] == "1 / 2 observed · 0 missing · 1 excluded"  # c3 expects nothing
    # 100 input tokens at $1/M + 20 output tokens at $5/M = $0.0002 a call
    assert "Usage: grounded 3 calls · 300 input tokens · 60 output tokens · $0.0006" in lines
    assert "Usage: citations_supported 2 calls · 200 input tokens · 40 output tokens · $0.0004" in lines
    # citation support's exclusion of c3 comes from its verdict, so it is judged (and cached) too
    assert "Cache: execution 0 hit/3 miss; judgment 0 hit/11 miss" in lines
    calls = len(standin.requests)
    assert calls == 3 + 2 + 3 + 2
    again = olo("run", cwd=tmp_path)
    # the unparseable judgments are not cached: they are asked again, everything else is a hit
    assert "Cache: execution 3 hit/0 miss; judgment 9 hit/2 miss" in again.out.splitlines(), again
    assert len(standin.requests) == calls + 2
    assert "Usage: grounded 1 call · 100 input tokens · 20 output tokens · $0.0002" in again.out.splitlines()


@pytest.mark.slow
def test_a_changed_model_or_provider_misses_the_judgment_cache(standin, tmp_path):
    judged_project(tmp_path, standin, "openai")
    olo("run", cwd=tmp_path)
    judged_project(tmp_path, standin, "openai", model="judge-2")
    result = olo("run", cwd=tmp_path)
    assert "Cache: execution 3 hit/0 miss; judgment 0 hit/11 miss" in result.out.splitlines(), result
    judged_project(tmp_path, standin, "anthropic", model="judge-2")
    result = olo("run", cwd=tmp_path)
    assert "Cache: execution 3 hit/0 miss; judgment 0 hit/11 miss" in result.out.splitlines(), result
    with sqlite3.connect(tmp_path / ".oloproof" / "store.db") as db:
        header = json.loads(db.execute("SELECT header FROM runs ORDER BY id DESC LIMIT 1").fetchone()[0])
    extra = header["evaluators"]["grounded"]["extra"]
    assert (extra["prompt_version"], extra["provider"], extra["model"]) == ("groundedness/v1", "anthropic", "judge-2")


# -- the provider's own code and version ------------------------------------------------------

PROVIDER = '''
import json

from attrs import frozen

from oloproof import Reply, hookimpl


@frozen(kw_only=True)
class Options:
    model: str


class AlwaysPass:
    name = "always_pass"

    def __init__(self, options):
        self.model = options.model

    def complete(self, prompt, *, system=None):
        return Reply(text=json.dumps({"verdict": "pass", "rationale": "fine"}), usage={})


@hookimpl
def oloproof_register_providers(registry):
    registry.add("always_pass", AlwaysPass, options=Options)
'''
PROVIDER_APP = "def run(input):\n    return {'answer': input['question']}\n"


def test_a_provider_s_code_and_version_are_part_of_the_judgment_key(tmp_path, monkeypatch):
    """A provider developed in place (a module outside site-packages, with its distribution's
    metadata beside it, as an editable install has): an unchanged re-run hits the judgment cache;
    the same replies from edited code miss it, and so does another version of its distribution."""
    import sys

    import oloproof

    site, project = tmp_path / "site", tmp_path / "project"
    info = site / "olo_always_pass-1.0.dist-info"
    info.mkdir(parents=True)
    project.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: olo-always-pass\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[oloproof]\nalways_pass = olo_always_pass\n", encoding="utf-8")
    (site / "olo_always_pass.py").write_text(PROVIDER, encoding="utf-8")
    (project / "provider_demo_app.py").write_text(PROVIDER_APP, encoding="utf-8")
    (project / "oloproof.yaml").write_text(
        "system: {callable: provider_demo_app:run}\ncases: cases.jsonl\n"
        "evaluators:\n  - {type: exact_judge, provider: always_pass, model: m1}\n", encoding="utf-8")
    (project / "cases.jsonl").write_text("".join(
        json.dumps({"id": f"c{i}", "input": {"question": f"q{i}"}, "expected": {"answer": f"q{i}"}}) + "\n"
        for i in range(2)), encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(sys, "path", list(sys.path))  # the project's directory is not left importable
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # an edit within the same second is read again

    def judgments() -> list:
        """The judgment cache's [hits, misses], the modules imported afresh as by a new process."""
        for name in ("olo_always_pass", "provider_demo_app"):
            sys.modules.pop(name, None)
        try:
            outcome = oloproof.run(project / "oloproof.yaml")
        finally:
            for name in ("olo_always_pass", "provider_demo_app"):
                sys.modules.pop(name, None)
        assert outcome.summaries["answer_equivalent"].value == 1.0
        return outcome.caches["judgment"]

    assert judgments() == [0, 2]
    assert judgments() == [2, 0]
    edited = PROVIDER.replace('json.dumps({"verdict": "pass", "rationale": "fine"})',
                              '\'{"verdict": "pass", "rationale": "fine"}\'')
    assert edited != PROVIDER
    (site / "olo_always_pass.py").write_text(edited, encoding="utf-8")  # the same replies, other code
    assert judgments() == [0, 2]
    assert judgments() == [2, 0]
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: olo-always-pass\nVersion: 1.1\n", encoding="utf-8")
    assert judgments() == [0, 2]
    with sqlite3.connect(project / ".oloproof" / "store.db") as db:
        header = json.loads(db.execute("SELECT header FROM runs ORDER BY id DESC LIMIT 1").fetchone()[0])
    plugin = header["evaluators"]["answer_equivalent"]["extra"]["provider_plugin"]
    assert (plugin["distribution"], plugin["version"]) == ("olo-always-pass", "1.1")


def test_a_missing_key_exits_2_before_any_case_runs(standin, tmp_path, monkeypatch):
    judged_project(tmp_path, standin)
    monkeypatch.delenv("OLO_JUDGE_KEY")
    result = olo("run", cwd=tmp_path)
    assert result.code == 2, result
    assert "the environment variable OLO_JUDGE_KEY is not set" in result.err
    assert "fix: export OLO_JUDGE_KEY=" in result.err
    assert not (tmp_path / "executed.log").exists() and standin.requests == []


@pytest.mark.slow
def test_the_key_is_nowhere_in_the_store_or_the_output(standin, tmp_path):
    judged_project(tmp_path, standin)
    outputs = [olo("run", cwd=tmp_path)]
    run_id = outputs[0].out.split()[1]
    outputs += [olo("inspect", run_id, "--case", "c2", cwd=tmp_path), olo("export", run_id, cwd=tmp_path),
                olo("inspect", run_id, "--failures", cwd=tmp_path), olo("runs", cwd=tmp_path),
                olo("--debug", "run", cwd=tmp_path, env={"OLO_JUDGE_KEY": "sk-wrong"})]
    assert standin.requests and all(KEY not in r.text for r in outputs)
    files = [p for p in (tmp_path / ".oloproof").rglob("*") if p.is_file()]
    assert files and all(KEY.encode() not in p.read_bytes() for p in files)


@pytest.mark.slow
def test_unparseable_verdicts_and_provider_faults_are_missing_with_their_reason(standin, tmp_path):
    judged_project(tmp_path, standin, extra="concurrency: 1\n")
    standin.faults.extend([Fault(503)] * 5)  # the first request fails all five attempts
    result = olo("run", cwd=tmp_path)
    run_id = result.out.split()[1]
    shown = olo("inspect", run_id, "--case", "c1", cwd=tmp_path).out
    assert "grounded: missing (provider_error: 503)" in shown
    assert "concise: missing (judge_unparseable)" in olo("inspect", run_id, "--case", "c3", cwd=tmp_path).out
    olo("export", run_id, cwd=tmp_path)
    lines = (tmp_path / ".oloproof" / "bundles" / run_id / "cases.jsonl").read_text().splitlines()
    c3 = json.loads(lines[2])["judgments"]["grounded"]
    assert c3["reason"] == "judge_unparseable" and c3["detail"]["raw"] == "I think it is fine."
    assert c3["detail"]["prompt_version"] == "groundedness/v1"


POLICY = """policy:
  version: 1
  rules:
    - {id: grounded-floor, metric: grounded, min: 0.4}
"""


def labelled_cases(n_agree_pass: int, n_agree_fail: int, n_judge_pass_human_fail: int,
                   n_judge_fail_human_pass: int) -> tuple[list[dict], list[dict]]:
    """Cases the stand-in judges pass (plain answers) or fail (UNSUPPORTED), and human labels."""
    cases, labels = [], []
    kinds = ([(True, True)] * n_agree_pass + [(False, False)] * n_agree_fail + [(True, False)] * n_judge_pass_human_fail
             + [(False, True)] * n_judge_fail_human_pass)
    for i, (judge_pass, human_pass) in enumerate(kinds):
        answer = "14 days." if judge_pass else "14 days. UNSUPPORTED claim."
        cases.append({"id": f"c{i:02d}", "input": {"question": f"q{i}", "answer": answer, "docs": ["kb-1"],
                                                    "cite": ["kb-1"]}, "expected": {"answer": "14 days"}})
        labels.append({"id": f"c{i:02d}", "label": human_pass})
    return cases, labels


@pytest.mark.slow
def test_a_rule_on_a_judge_is_manual_review_until_exactly_that_judge_is_validated(standin, tmp_path):
    cases, labels = labelled_cases(40, 30, 1, 1)  # 72 cases: kappa 0.943, lower bound 0.612
    judged_project(tmp_path, standin, cases=cases, policy=POLICY)
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels), encoding="utf-8")
    before = olo("run", cwd=tmp_path)
    assert before.code == 3, before
    assert "│ grounded-floor │ grounded │ MANUAL_REVIEW │ judge_not_validated │" in before.out
    calls = len(standin.requests)
    validated = olo("judge", "validate", "--labels", "labels.jsonl", "--criterion", "grounded", cwd=tmp_path)
    assert validated.code == 0, validated
    assert len(standin.requests) == calls  # every verdict came from the run's judgment cache
    assert "│ agreement          │ 97.2%    │" in validated.out  # 70 of 72
    assert "met: without labels of a run, rules on this criterion may gate on the judge's rate" in validated.out
    after = olo("run", cwd=tmp_path)
    assert after.code == 0, after
    assert "│ grounded-floor │ grounded │ PASS    │ interval_within_threshold │" in after.out
    judged_project(tmp_path, standin, model="judge-2", cases=cases, policy=POLICY)  # another judge
    other = olo("run", cwd=tmp_path)
    assert other.code == 3 and "judge_not_validated" in other.out


@pytest.mark.slow
def test_a_validation_below_the_requirement_leaves_the_rule_in_manual_review(standin, tmp_path):
    cases, labels = labelled_cases(10, 4, 6, 4)  # 24 cases, kappa 0.118
    judged_project(tmp_path, standin, cases=cases, policy=POLICY)
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels), encoding="utf-8")
    olo("run", cwd=tmp_path)
    validated = olo("judge", "validate", "--labels", "labels.jsonl", "--criterion", "grounded", cwd=tmp_path)
    assert validated.code == 3, validated
    assert "not met: without labels of a run, rules on this criterion stay MANUAL_REVIEW (judge_not_validated)" in validated.out
    assert "judge_not_validated" in olo("run", cwd=tmp_path).out


@pytest.mark.slow
def test_inspect_failures_gives_the_judge_s_rationale_and_says_an_llm_judged(standin, tmp_path):
    judged_project(tmp_path, standin)
    assert olo("run", cwd=tmp_path).code == 0
    out = olo("inspect", "latest", "--failures", cwd=tmp_path).out
    why = out[out.index("Why:"):]
    assert "no reason given" not in why, why
    c2 = why[why.index("\nc2\n"):].split("\n\n")[0]
    assert ("  grounded: failed, the LLM judge's rationale, prompt groundedness/v1: the answer adds a claim"
            in c2.splitlines()), c2
