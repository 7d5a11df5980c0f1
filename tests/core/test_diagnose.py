"""`oloproof diagnose` end to end, on a staged fixture whose failures have known causes.

Every failing case of the fixture fails for one designed reason (a retrieval miss, a passage
ranked below top_k, a passage within top_k dropped by the token budget, a model that answers
wrongly whatever it is given, a distractor read first, a case without relevance labels, and one
case that fails only on its first call), so each label, reason and position is known in advance.
The fixture logs every retrieve and generate call to files in the project directory: that is how
the tests tell a real re-execution from a cached one.
"""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from conftest import Project
from oloproof_core.outputs.diagnosis import implication_lines

APP = '''
"""A staged fixture whose failing cases have known causes (tests/core/test_diagnose.py)."""

from pathlib import Path

from oloproof import Passage, Retrieval, rag_system

HERE = Path(__file__).resolve().parent
DOCS = {
    "ans": "the answer is blue",  # 4 tokens: the one relevant passage
    "f1": "filler one two three",
    "f2": "filler four five six",
    "f3": "filler seven eight nine",
    "long": "a long passage of ten tokens that fills the budget",  # 10 tokens
}


def log(name, line):
    with open(HERE / name, "a", encoding="utf-8") as handle:
        handle.write(line + "\\n")


@rag_system(name="fixture", version="1", depth=4, top_k=2, token_budget=12, index_version="fixture-1")
class Fixture:
    def retrieve(self, input, depth):
        log("retrieve.log", input["q"])
        if (HERE / "retrieve.forbidden").exists():
            raise RuntimeError("retrieve was called")
        return Retrieval(query=input["q"], depth=depth, candidates=tuple(
            Passage(doc_id=d, score=1.0 / i, text=DOCS[d]) for i, d in enumerate(input["docs"][:depth], 1)))

    def generate(self, input, context):
        log("generate.log", input["q"])
        if input.get("garble"):  # the model gets it wrong whatever it is given
            return {"answer": "no idea"}
        if input.get("flaky"):  # wrong on its first call only
            counter = HERE / "flaky.count"
            calls = int(counter.read_text()) if counter.exists() else 0
            counter.write_text(str(calls + 1))
            if calls == 0:
                return {"answer": "timeout"}
        items = context.items[:1] if input.get("first_only") else context.items
        return {"answer": " ".join(item.text or "" for item in items)}

    def count_tokens(self, passage):
        return len((passage.text or "").split())
'''

RERANK = '''
def answer_first(input, candidates):
    return sorted(candidates, key=lambda passage: "answer" not in (passage.text or ""))
'''

CONFIG = """
system:
  name: fixture
  version: "1"
  rag: app:Fixture
cases: cases.jsonl
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
  - {type: hit_rate, k: 2}
"""


def fixture_case(case_id: str, docs: list[str], *, relevant: bool = True, gold: bool = True, **flags) -> dict:
    expected: dict = {"answer": "blue"}
    if relevant:
        expected["relevant"] = [{"doc_id": "ans"}]
    if gold:
        expected["gold_context"] = [{"doc_id": "ans", "text": "the answer is blue"}]
    return {"id": case_id, "input": {"q": case_id, "docs": docs, **flags}, "expected": expected}


CASES = [
    fixture_case("ok", ["ans", "f1", "f2"]),
    fixture_case("miss", ["f1", "f2", "f3"]),  # RETRIEVAL_MISS
    fixture_case("ranked", ["f1", "f2", "ans"]),  # RANKED_OUT: position 3, top_k 2
    fixture_case("budget_a", ["long", "ans"]),  # CONTEXT_ASSEMBLY_LOSS: 10 + 4 tokens > 12
    fixture_case("budget_b", ["long", "ans", "f1"]),  # the same, with a third candidate
    fixture_case("wrong_answer", ["ans", "f1"], garble=True),  # GENERATION_FAILURE at position 1
    fixture_case("wrong_anyway", ["f1", "f2"], garble=True),  # GENERATION_FAILURE, never retrieved
    fixture_case("flaky", ["ans", "f1"], flaky=True),  # passes in the control: UNRESOLVED
    fixture_case("distracted", ["f1", "ans"], first_only=True),  # relevant in context, yet recovered
    fixture_case("unlabelled", ["f1", "f2"], relevant=False),  # recovered, no labels to place it
    fixture_case("no_gold", ["f1", "f2"], gold=False),  # excluded: no gold context
]
SELECTED = ["miss", "ranked", "budget_a", "budget_b", "wrong_answer", "wrong_anyway", "flaky", "distracted",
            "unlabelled"]

HYPOTHESIS = "This is a hypothesis to test, not an established cause."
SELECTED_LINE = "Selected: 9 failed cases with gold context (observed; no population claim)"
EXCLUDED_LINE = ("Excluded: 1 failed case, no_gold_context - declare the passages that would have answered the "
                 "case in its `expected.gold_context`, as a list of `{doc_id, text}` objects; an intervention "
                 "needs them to tell a retrieval failure from a generation one")
LABEL_LINES = [
    "RETRIEVAL_MISS: 1 of 9, recovered; no relevant evidence was retrieved",
    "RANKED_OUT: 1 of 9, recovered; relevant evidence was retrieved below top-k",
    "CONTEXT_ASSEMBLY_LOSS: 2 of 9, recovered; relevant evidence within top-k was left out of the context",
    # wrong_anyway never had its passage retrieved: two causes at once, counted apart
    "GENERATION_FAILURE: 2 of 9, still failed with the gold context; in 1 of them the relevant evidence was not "
    "in the context",
    "UNRESOLVED: 1 of 9, passed when re-executed unchanged, so it was unstable, not diagnosed",
    "UNRESOLVED: 1 of 9, recovered, though relevant evidence was already in the context",
    "UNRESOLVED: 1 of 9, recovered, but without relevance labels no stage can be implicated",
]
GOLD_SUMMARY = [
    SELECTED_LINE,
    EXCLUDED_LINE,
    "Control: 1 of 9 passed when re-executed without the intervention",
    "Recovered under gold context: 7 of 9",
    *LABEL_LINES,
    # the flaky case recovered too, but so it did in the control: 6 recovered failures, not 7
    "Implicated: context budget, in 2 of the 6 recovered failures.",
    f"Candidate experiment: a larger token budget. {HYPOTHESIS}",
    f"Candidate experiment: smaller chunks. {HYPOTHESIS}",
    # generation counts only wrong_answer, whose passage was in its context: 1, below the budget's 2
]
GOLD_INSPECT = [
    "budget_a: CONTEXT_ASSEMBLY_LOSS, relevant_dropped_from_context, strength intervention_recovery, "
    "best relevant position 2",
    "budget_b: CONTEXT_ASSEMBLY_LOSS, relevant_dropped_from_context, strength intervention_recovery, "
    "best relevant position 2",
    "distracted: UNRESOLVED, relevant_in_context, strength none, best relevant position 2",
    "flaky: UNRESOLVED, passed_in_control, strength none, best relevant position 1",
    "miss: RETRIEVAL_MISS, relevant_not_retrieved, strength intervention_recovery, best relevant position none",
    "ranked: RANKED_OUT, relevant_ranked_below_top_k, strength intervention_recovery, best relevant position 3",
    "unlabelled: UNRESOLVED, no_relevance_labels, strength none, best relevant position unknown",
    "wrong_answer: GENERATION_FAILURE, fails_with_gold_context, strength intervention_non_recovery, "
    "best relevant position 1",
    # recovery first, position second: never retrieved, and still a generation failure
    "wrong_anyway: GENERATION_FAILURE, fails_with_gold_context, strength intervention_non_recovery, "
    "best relevant position none",
    "no_gold: not diagnosed, no_gold_context",
    # what the run recorded about each case's relevant passage, whatever its label
    "Evidence in the run (relevance_unit doc: positions count documents):",
    "  budget_a: dropped for token_budget, position 2",
    "  budget_b: dropped for token_budget, position 2",
    "  distracted: in context, position 2",
    "  flaky: in context, position 1",
    "  miss: not retrieved",
    "  ranked: ranked beyond top_k, position 3",
    "  unlabelled: unknown (no relevance labels, or nothing recorded)",
    "  wrong_answer: in context, position 1",
    "  wrong_anyway: not retrieved",
]
# Any wording stronger than "Implicated" / "Candidate experiment" is a claim diagnose must not make.
CAUSAL = re.compile(r"\bcaus\w*|\bbecause\b|\bdue to\b|\bprov(e|es|ed|en)\b|\bresponsible\b|\bexplain\w*", re.I)
SHA = r"sha256:[0-9a-f]{64}"
RUN = r"run_[0-9A-HJKMNP-TV-Z]{26}"


def no_causal_claim(text: str) -> None:
    found = CAUSAL.findall(text.replace("not an established cause", ""))
    assert not found, f"a causal word in:\n{text}"


def run_id_of(result) -> str:
    match = re.match(rf"Run ({RUN}) ", result.out)
    assert match, result
    return match.group(1)


def split_summary(out: str) -> tuple[list[str], str, list[tuple[str, str]], str]:
    """(the lines before the id, the diagnosis id, the child runs as (role, run), the Cases line)."""
    lines = out.splitlines()
    diagnosis = [i for i, line in enumerate(lines) if line.startswith("Diagnosis sha256:")]
    assert len(diagnosis) == 1, out
    at = diagnosis[0]
    object_id = lines[at].split()[1]
    assert re.fullmatch(SHA, object_id), out
    children: list[tuple[str, str]] = []
    rest = lines[at + 1:]
    if rest and rest[0].startswith("Child runs: "):
        for item in rest.pop(0)[len("Child runs: "):].split(", "):
            role, _, run = item.rpartition(" ")
            assert re.fullmatch(RUN, run), out
            children.append((role, run))
    assert rest[0] == f"Cases: oloproof inspect {object_id}", out
    assert all(line.startswith("To test ") for line in rest[1:]), out
    return lines[:at], object_id, children, rest[0]


def lines_of(project: Project, name: str) -> list[str]:
    path = project.root / name
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def run_headers(project: Project) -> dict[str, dict]:
    with sqlite3.connect(project.root / ".oloproof" / "store.db") as db:
        return {r[0]: json.loads(r[1]) for r in db.execute("SELECT id, header FROM runs")}


def child_records(project: Project, run_id: str) -> dict[str, dict]:
    with sqlite3.connect(project.root / ".oloproof" / "store.db") as db:
        return {r[0]: json.loads(r[1]) for r in db.execute(
            "SELECT case_id, record FROM run_cases WHERE run_id = ?", (run_id,))}


def make_project(root) -> Project:
    project = Project(root)
    project.write("app.py", APP)
    project.write("rerank.py", RERANK)
    project.write("oloproof.yaml", CONFIG)
    project.cases(CASES)
    return project


# -- the staged fixture, run and diagnosed once for the module -------------------------------------


class Staged:
    """The fixture after `oloproof run` and the gold-context diagnosis, with what each printed."""


@pytest.fixture(scope="module")
def staged(tmp_path_factory) -> Staged:
    s = Staged()
    s.project = project = make_project(tmp_path_factory.mktemp("staged"))
    s.run = project.run("run")
    s.run_id = run_id_of(s.run)
    s.generate_after_run = lines_of(project, "generate.log")
    s.retrieve_after_run = lines_of(project, "retrieve.log")
    s.gold = project.run("diagnose", s.run_id, "--intervention", "gold-context", "--criterion", "answer_correct")
    s.summary, s.gold_id, s.children, _ = split_summary(s.gold.out)
    s.generate_after_gold = lines_of(project, "generate.log")
    s.inspect = project.run("inspect", s.gold_id)
    s.runs = project.run("runs", "--all")
    return s


@pytest.mark.slow
def test_the_run_fails_the_designed_cases(staged):
    assert staged.run.code == 0, staged.run
    assert "answer_correct │ 9.1%" in staged.run.out  # ok passes; every other case fails by design
    assert len(staged.generate_after_run) == len(CASES)


@pytest.mark.slow
def test_gold_context_summary_lines(staged):
    assert staged.gold.code == 0, staged.gold
    assert staged.gold.err == ""
    assert staged.summary == GOLD_SUMMARY


def test_inspect_lists_every_label_reason_strength_and_position(staged):
    assert staged.inspect.code == 0, staged.inspect
    assert staged.inspect.out.splitlines() == GOLD_INSPECT


def test_gold_context_creates_two_stored_child_runs_linked_to_the_run(staged):
    assert [role for role, _ in staged.children] == ["gold context", "control"]
    headers = run_headers(staged.project)
    for role, run in staged.children:
        assert run in staged.runs.out  # `oloproof runs --all` lists them
        header = headers[run]
        assert (header["parent"], header["role"], header["intervention"]) == (staged.run_id, role, "gold-context")
        assert header["state"] == "DIAGNOSTIC/COMPLETE" and header["cases"] == 9
        assert sorted(child_records(staged.project, run)) == sorted(SELECTED)
    gold_run, control_run = (run for _, run in staged.children)
    gold = child_records(staged.project, gold_run)["miss"]
    assert gold["artifacts"]["context/v1"][0]["source"] == "gold_context"
    assert "retrieval/v1" not in gold["artifacts"]  # the gold-context run only generates
    control = child_records(staged.project, control_run)["miss"]
    assert control["artifacts"]["context/v1"][0]["source"] == "retrieval"


def test_child_runs_execute_for_real_not_from_the_generate_cache(staged):
    # The control re-executes each case unchanged, with the very context the run cached a
    # generation for: only a real call puts it in the log.
    new = staged.generate_after_gold[len(staged.generate_after_run):]
    assert sorted(new) == sorted(SELECTED * 2)


def test_the_control_catches_the_nondeterministic_case(staged):
    assert "flaky: UNRESOLVED, passed_in_control, strength none, best relevant position 1" in staged.inspect.out
    # the first call failed (the run), the gold-context run's and the control's passed
    assert (staged.project.root / "flaky.count").read_text() == "3"


def test_no_causal_word_in_the_diagnosis(staged):
    no_causal_claim(staged.gold.out + staged.inspect.out)


# -- replays of the recorded retrieval: top-k and reranker -----------------------------------------


class Replays:
    pass


@pytest.fixture(scope="module")
def replays(staged) -> Replays:
    """top-k 3 and reranker, with the retriever forbidden and its stage cache emptied first."""
    project = staged.project
    with sqlite3.connect(project.root / ".oloproof" / "store.db") as db:
        db.execute("DELETE FROM cache WHERE ns = 'stage:retrieve'")
    (project.root / "retrieve.forbidden").write_text("replays never call retrieve\n")
    r = Replays()
    r.retrieve_before = lines_of(project, "retrieve.log")
    r.generate_before = lines_of(project, "generate.log")
    try:
        r.top_k = project.run("diagnose", staged.run_id, "--intervention", "top-k", "--top-k", "3",
                              "--criterion", "answer_correct")
        r.top_k_parts = split_summary(r.top_k.out)
        r.top_k_inspect = project.run("inspect", r.top_k_parts[1])
        r.reranker = project.run("diagnose", staged.run_id, "--intervention", "reranker",
                                 "--reranker", "rerank:answer_first", "--criterion", "answer_correct")
        r.reranker_parts = split_summary(r.reranker.out)
        r.reranker_inspect = project.run("inspect", r.reranker_parts[1])
    finally:
        (project.root / "retrieve.forbidden").unlink()
    r.retrieve_after = lines_of(project, "retrieve.log")
    r.generate_after = lines_of(project, "generate.log")
    return r


def replay_summary(staged, label: str, recovered: int) -> list[str]:
    return [SELECTED_LINE, EXCLUDED_LINE,
            "Control: 1 of 9 passed when re-executed without the intervention",
            f"Recovered under {label}: {recovered} of 9",
            f"Confirmed under {label}: 1 of 1 RANKED_OUT cases also recovered",
            f"Labels from gold context (diagnosis {staged.gold_id}): 7 of 9 recovered",
            *LABEL_LINES]


@pytest.mark.slow
def test_top_k_replay_recovers_the_ranked_out_case(staged, replays):
    assert replays.top_k.code == 0, replays.top_k
    # ranked (position 3) fits once top-k is 3; flaky passes now, in the replay control too
    assert replays.top_k_parts[0] == replay_summary(staged, "top-k 3", 2)


@pytest.mark.slow
def test_top_k_replay_carries_the_gold_context_labels_and_child_runs(staged, replays):
    _, _, children, _ = replays.top_k_parts
    assert children[:2] == staged.children
    assert [role for role, _ in children[2:]] == ["top-k 3", "replay control"]
    lines = replays.top_k_inspect.out.splitlines()
    # a wider cut-off cannot bring back a passage the budget dropped, and the line says so
    assert lines[0] == ("budget_a: CONTEXT_ASSEMBLY_LOSS, relevant_dropped_from_context, strength "
                        "intervention_recovery, best relevant position 2, recovered under top-k 3: no, relevant "
                        "evidence dropped for token_budget in the replay")
    assert ("ranked: RANKED_OUT, relevant_ranked_below_top_k, strength intervention_recovery, best relevant "
            "position 3, recovered under top-k 3: yes") in lines
    assert ("flaky: UNRESOLVED, passed_in_control, strength none, best relevant position 1, recovered under "
            "top-k 3: yes, passed in replay control") in lines
    assert "no_gold: not diagnosed, no_gold_context" in lines
    ranked = child_records(staged.project, children[2][1])["ranked"]
    assert [i["doc_id"] for i in ranked["artifacts"]["context/v1"][0]["items"]] == ["f1", "f2", "ans"]


def test_reranker_replay(staged, replays):
    assert replays.reranker.code == 0, replays.reranker
    summary, _, children, _ = replays.reranker_parts
    # answer_first puts the relevant passage first: ranked, both budget cases and the distracted
    # one recover, and flaky passes as before
    assert summary == replay_summary(staged, "reranker rerank:answer_first", 5)
    assert children[:2] == staged.children
    assert [role for role, _ in children[2:]] == ["reranker rerank:answer_first", "replay control"]
    assert ("distracted: UNRESOLVED, relevant_in_context, strength none, best relevant position 2, recovered "
            "under reranker rerank:answer_first: yes") in replays.reranker_inspect.out.splitlines()
    budget = child_records(staged.project, children[2][1])["budget_a"]
    assert [c["doc_id"] for c in budget["artifacts"]["retrieval/v1"][0]["candidates"]] == ["ans", "long"]


def test_replays_never_call_retrieve(replays):
    assert "retrieve was called" not in replays.top_k.out + replays.reranker.out
    assert replays.retrieve_after == replays.retrieve_before


def test_replays_generate_afresh(replays):
    new = replays.generate_after[len(replays.generate_before):]
    assert sorted(new) == sorted(SELECTED * 4)  # two replays, each with its replay control


def test_no_causal_word_in_the_replays(replays):
    no_causal_claim(replays.top_k.out + replays.top_k_inspect.out + replays.reranker.out
                    + replays.reranker_inspect.out)


# -- bad arguments: exit 2, one line, a fix, nothing re-executed -----------------------------------


def bad(staged, *args: str) -> str:
    before = set(run_headers(staged.project))
    result = staged.project.run("diagnose", *args)
    assert result.code == 2, result
    assert result.out == "" and "Traceback" not in result.err, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "; fix: " in lines[0], result
    assert set(run_headers(staged.project)) == before  # nothing ran
    return lines[0]


@pytest.mark.parametrize(("args", "expected"), [
    (["--intervention", "gold-context", "--criterion", "answer_corect"],
     "has no criterion 'answer_corect'; fix: use one of: answer_correct, hit_rate_at_2"),
    (["--intervention", "top-k", "--top-k", "2", "--criterion", "answer_correct"],
     "--top-k 2 is not above the run's top_k 2; fix: pass a larger --top-k, up to the depth 4"),
    (["--intervention", "top-k", "--top-k", "5", "--criterion", "answer_correct"],
     "--top-k 5 is beyond the recorded depth 4; fix: pass --top-k 4 at most"),
    (["--intervention", "top-k", "--criterion", "answer_correct"],
     "--intervention top-k needs --top-k N, the wider cut-off to replay with; fix: pass --top-k N with 2 < N <= 4"),
    (["--intervention", "reranker", "--reranker", "no_such_module:rerank", "--criterion", "answer_correct"],
     "--reranker: cannot import module 'no_such_module'"),
    (["--intervention", "reranker", "--reranker", "rerank:no_such_function", "--criterion", "answer_correct"],
     "--reranker: module 'rerank' has no attribute 'no_such_function'; fix: define no_such_function in rerank.py"),
    (["--intervention", "reranker", "--criterion", "answer_correct"],
     "--intervention reranker needs --reranker MODULE:FUNCTION"),
    (["--intervention", "gold-contxt", "--criterion", "answer_correct"],
     "unknown intervention 'gold-contxt'; fix: did you mean 'gold-context'?"),
    (["--intervention", "gold-context", "--option", "depth=8", "--criterion", "answer_correct"],
     "intervention 'gold-context' takes no option --option depth; fix: remove it"),
    (["--intervention", "top-k", "--top-k", "3", "--option", "depth=8", "--criterion", "answer_correct"],
     "unknown key 'depth'; fix: remove it; intervention 'top-k' accepts: top_k"),
])
def test_bad_arguments_exit_2_with_a_fix(staged, args, expected):
    assert expected in bad(staged, staged.run_id, *args)


def test_an_unknown_run_exits_2(staged):
    assert "no run run_01ZZZZZZZZZZZZZZZZZZZZZZZZ in .oloproof/; fix: list the runs with `oloproof runs`" in bad(
        staged, "run_01ZZZZZZZZZZZZZZZZZZZZZZZZ", "--intervention", "gold-context", "--criterion", "answer_correct")


def test_a_child_run_is_not_diagnosed(staged):
    child = staged.children[1][1]
    line = bad(staged, child, "--intervention", "gold-context", "--criterion", "answer_correct")
    assert f"{child} is the control run of a diagnosis of {staged.run_id}" in line
    assert line.endswith(f"fix: diagnose {staged.run_id}")


# -- on their own projects --------------------------------------------------------------------------


@pytest.mark.slow
def test_a_replay_before_any_gold_context_diagnosis(tmp_path):
    project = make_project(tmp_path)
    run_id = run_id_of(project.run("run"))
    result = project.run("diagnose", run_id, "--intervention", "top-k", "--top-k", "3", "--criterion",
                         "answer_correct")
    assert result.code == 0, result
    summary, object_id, children, _ = split_summary(result.out)
    assert summary == [SELECTED_LINE, EXCLUDED_LINE,
                       # flaky passes on its second call and its third: in the replay and its control
                       "Control: 1 of 9 passed when re-executed without the intervention",
                       "Recovered under top-k 3: 2 of 9",
                       "Confirmed under top-k 3: 0 of 0 RANKED_OUT cases also recovered",
                       "Labels from gold context: none yet; run `oloproof diagnose RUN_ID --intervention "
                       "gold-context --criterion answer_correct` first"]
    assert [role for role, _ in children] == ["top-k 3", "replay control"]
    inspect = project.run("inspect", object_id).out.splitlines()
    assert ("ranked: UNRESOLVED, no_gold_context_diagnosis, strength none, best relevant position 3, "
            "recovered under top-k 3: yes") in inspect


BLACK_BOX = '''
from oloproof import Passage, Retrieval, current_case, system


@system(name="blackbox", version="1", records=("retrieval/v1",))
def run(input):
    current_case().retrieval(Retrieval(query=input["q"], depth=3, candidates=tuple(
        Passage(doc_id=d, score=1.0, text=d) for d in input["docs"])))
    with open("calls.log", "a", encoding="utf-8") as log:
        log.write(input["q"] + "\\n")
    return {"answer": "no idea"}
'''


@pytest.mark.slow
@pytest.mark.parametrize("intervention", [["gold-context"], ["top-k", "--top-k", "3"]])
def test_a_black_box_is_unresolved_and_nothing_is_re_executed(tmp_path, intervention):
    project = Project(tmp_path)
    project.write("app.py", BLACK_BOX)
    project.write("oloproof.yaml", CONFIG.replace("rag: app:Fixture", "callable: app:run")
                  .replace("  - {type: hit_rate, k: 2}\n", ""))
    project.cases([fixture_case("late", ["f1", "ans"]), fixture_case("absent", ["f1"]),
                   fixture_case("no_gold", ["f1"], gold=False)])
    run_id = run_id_of(project.run("run"))
    result = project.run("diagnose", run_id, "--intervention", *intervention, "--criterion", "answer_correct")
    assert result.code == 0, result
    summary, object_id, children, _ = split_summary(result.out)
    assert summary == ["Selected: 2 failed cases with gold context (observed; no population claim)",
                       EXCLUDED_LINE,
                       "UNRESOLVED: 2 of 2, the system is not staged, so no case was re-executed"]
    assert children == []
    assert project.runs() == [run_id]
    assert len(lines_of(project, "calls.log")) == 3  # the run's calls only
    inspect = project.run("inspect", object_id)
    assert inspect.out.splitlines() == [
        "absent: UNRESOLVED, intervention_unsupported, strength none, best relevant position none",
        "late: UNRESOLVED, intervention_unsupported, strength none, best relevant position 2",
        "no_gold: not diagnosed, no_gold_context",
        "Evidence in the run (relevance_unit doc: positions count documents):",
        "  absent: not retrieved",
        "  late: retrieved (no context recorded), position 2",
    ]
    no_causal_claim(result.out + inspect.out)


# -- the implication lines, for label mixes the fixture does not have -------------------------------


def cases_of(*labels: str, unstable: int = 0) -> list[dict]:
    out = [{"label": label, "recovered": label not in ("GENERATION_FAILURE",), "control_passed": False}
           for label in labels]
    out += [{"label": "UNRESOLVED", "recovered": True, "control_passed": True}] * unstable
    return out


def test_the_documented_mix_implicates_the_budget():
    assert implication_lines(cases_of("RETRIEVAL_MISS", "CONTEXT_ASSEMBLY_LOSS", "CONTEXT_ASSEMBLY_LOSS",
                                      "GENERATION_FAILURE")) == [
        "Implicated: context budget, in 2 of the 3 recovered failures.",
        f"Candidate experiment: a larger token budget. {HYPOTHESIS}",
        f"Candidate experiment: smaller chunks. {HYPOTHESIS}",
    ]


def test_ranked_out_and_retrieval_misses_name_their_own_experiments():
    assert implication_lines(cases_of("RANKED_OUT", "RANKED_OUT", "RETRIEVAL_MISS", unstable=1)) == [
        "Implicated: ranking below top-k, in 2 of the 3 recovered failures.",
        f"Candidate experiment: a larger top-k. {HYPOTHESIS}",
        f"Candidate experiment: a reranker. {HYPOTHESIS}",
    ]
    assert implication_lines(cases_of("RETRIEVAL_MISS", "GENERATION_FAILURE", "RETRIEVAL_MISS")) == [
        "Implicated: retrieval, in 2 of the 2 recovered failures.",
        f"Candidate experiment: query expansion or rewriting. {HYPOTHESIS}",
        f"Candidate experiment: a different retriever or index. {HYPOTHESIS}",
    ]


def test_generation_is_implicated_when_it_is_the_most_common_label():
    assert implication_lines(cases_of("GENERATION_FAILURE", "GENERATION_FAILURE", "RETRIEVAL_MISS")) == [
        "Implicated: generation, in 2 of the 3 selected failures.",
        f"Candidate experiment: a prompt or model change. {HYPOTHESIS}",
    ]


def test_nothing_is_implicated_when_every_case_is_unresolved():
    assert implication_lines(cases_of(unstable=3)) == []
