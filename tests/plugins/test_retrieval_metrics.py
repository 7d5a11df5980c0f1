"""hit_rate, recall, mrr and ndcg: checked against trec_eval (through ir-measures) and by hand."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from importlib.metadata import entry_points

import ir_measures
import numpy as np
import pytest
from ir_measures import RR, R, Qrel, ScoredDoc, Success, nDCG

from oloproof import Case, ConfigError, Execution, Judgment
from oloproof_hit_rate import HitRate
from oloproof_hit_rate import Options as HitRateOptions
from oloproof_mrr import Options as MrrOptions
from oloproof_mrr import ReciprocalRank
from oloproof_ndcg import Ndcg
from oloproof_ndcg import Options as NdcgOptions
from oloproof_recall import Options as RecallOptions
from oloproof_recall import Recall

EXPONENTIAL = {0: 0, 1: 1, 2: 3, 3: 7}  # 2^grade - 1, as a gain table for trec_eval
MAX_K = 12


def evaluators(k: int, unit: str = "doc") -> dict:
    return {
        "hit_rate": HitRate(HitRateOptions(k=k, relevance_unit=unit)),
        "recall": Recall(RecallOptions(k=k, relevance_unit=unit)),
        "mrr": ReciprocalRank(MrrOptions(k=k, relevance_unit=unit)),
        "ndcg": Ndcg(NdcgOptions(k=k, relevance_unit=unit)),
        "ndcg_exp": Ndcg(NdcgOptions(k=k, relevance_unit=unit, gain="exponential")),
    }


def make_case(labels: list[dict] | None, case_id: str = "q") -> Case:
    expected = {} if labels is None else {"relevant": labels}
    return Case(id=case_id, input={"question": "?"}, expected=expected)


def make_execution(*rankings: list) -> Execution:
    """One retrieval/v1 record per ranking; an entry is a doc_id or a (doc_id, chunk_id) pair."""
    records = []
    for ranking in rankings:
        candidates = []
        for position, entry in enumerate(ranking):
            doc, chunk = entry if isinstance(entry, tuple) else (entry, None)
            candidate = {"doc_id": doc, "score": float(position)}  # ascending: scores must not reorder
            if chunk is not None:
                candidate["chunk_id"] = chunk
            candidates.append(candidate)
        records.append({"query": "?", "depth": max(len(ranking), 1), "candidates": candidates})
    return Execution(output={"answer": "x"}, artifacts={"retrieval/v1": tuple(records)})


def values(case: Case, execution: Execution, k: int, unit: str = "doc") -> dict:
    return {name: e.evaluate(case, execution).value for name, e in evaluators(k, unit).items()}


# -- a reference: trec_eval (pytrec_eval) and ir-measures' RR@k, on a few hundred random queries --


def reference_key(doc: str, chunk: str, unit: str) -> str:
    return f"{doc}::{chunk}" if unit == "chunk" else doc


def random_queries(rng: np.random.Generator, n: int) -> list[dict]:
    queries = []
    for i in range(n):
        docs = [f"d{j}" for j in rng.choice(25, size=int(rng.integers(1, 7)), replace=False)]
        labels = [{"doc_id": doc, "chunk_id": f"c{int(rng.integers(3))}", "grade": int(rng.integers(0, 4))}
                  for doc in docs for _ in range(int(rng.integers(1, 3)))]
        length = int(rng.integers(0, 16))
        # drawn with replacement from a small pool, so rankings repeat units and hit labels often
        ranking = [(f"d{int(rng.integers(25))}", f"c{int(rng.integers(3))}") for _ in range(length)]
        queries.append({"id": f"q{i}", "labels": labels, "ranking": ranking, "k": int(rng.integers(1, MAX_K + 1)),
                        "unit": "chunk" if rng.random() < 0.5 else "doc"})
    return queries


def reference_values(queries: list[dict], unit: str) -> dict:
    """Per query and measure, trec_eval's value on the deduplicated ranking (scores strictly falling)."""
    qrels, run = [], []
    for q in queries:
        grades: dict[str, int] = {}
        for label in q["labels"]:
            key = reference_key(label["doc_id"], label["chunk_id"], unit)
            grades[key] = max(grades.get(key, 0), label["grade"])
        qrels += [Qrel(q["id"], key, grade) for key, grade in grades.items()]
        seen: list[str] = []
        for doc, chunk in q["ranking"]:
            key = reference_key(doc, chunk, unit)
            if key not in seen:
                seen.append(key)
        run += [ScoredDoc(q["id"], key, float(len(seen) - rank)) for rank, key in enumerate(seen)]
    out = {}
    # one call per family: ir-measures 0.4.3 mislabels results when nDCG with and without
    # custom gains, at several cutoffs, share one call
    for family in (Success, R, RR, nDCG, nDCG(gains=EXPONENTIAL)):
        measures = [family @ k for k in range(1, MAX_K + 1)]
        out.update({(r.query_id, str(r.measure)): r.value for r in ir_measures.iter_calc(measures, qrels, run)})
    return out


def test_metrics_match_trec_eval_on_random_queries():
    rng = np.random.default_rng(20240607)
    queries = random_queries(rng, 400)
    compared = excluded = 0
    for unit in ("doc", "chunk"):
        mine = [q for q in queries if q["unit"] == unit]
        reference = reference_values(mine, unit)
        for q in mine:
            case = make_case(q["labels"], q["id"])
            execution = make_execution(q["ranking"])
            k = q["k"]
            labelled = any(label["grade"] > 0 for label in q["labels"])
            for evaluator in evaluators(k, unit).values():
                reason = evaluator.exclude(case)
                assert reason == (None if labelled else "no_relevance_labels")
            if not labelled:
                excluded += 1
                continue
            got = values(case, execution, k, unit)
            names = {"hit_rate": Success @ k, "recall": R @ k, "mrr": RR @ k, "ndcg": nDCG @ k,
                     "ndcg_exp": nDCG(gains=EXPONENTIAL) @ k}
            for name, measure in names.items():
                # trec_eval leaves out a query with an empty ranking; every measure is 0 there
                want = reference.get((q["id"], str(measure)), 0.0)
                assert got[name] == pytest.approx(want, abs=1e-9, rel=0), (name, q)
            compared += 1
    assert compared > 300 and excluded > 0  # the draw exercises both paths


def test_random_rankings_include_duplicates_and_short_lists():
    queries = random_queries(np.random.default_rng(20240607), 400)
    assert any(len(set(q["ranking"])) < len(q["ranking"]) for q in queries)
    assert any(len(q["ranking"]) < q["k"] for q in queries)
    assert any(not q["ranking"] for q in queries)


# -- conventions, by hand ------------------------------------------------------------------


def test_graded_ndcg_by_hand():
    case = make_case([{"doc_id": "a", "grade": 3}, {"doc_id": "b", "grade": 2}, {"doc_id": "c"}])
    execution = make_execution(["c", "x", "a"])
    ideal = 3 + 2 / math.log2(3) + 1 / 2
    linear = (1 + 3 / 2) / ideal
    exponential = (1 + 7 / 2) / (7 + 3 / math.log2(3) + 1 / 2)
    got = values(case, execution, k=3)
    assert got["ndcg"] == pytest.approx(linear, abs=1e-12)
    assert got["ndcg_exp"] == pytest.approx(exponential, abs=1e-12)
    assert Ndcg(NdcgOptions(k=3)).evaluate(case, execution).status == "score"


def test_ideal_dcg_is_cut_at_k():
    case = make_case([{"doc_id": "a", "grade": 1}, {"doc_id": "b", "grade": 1}, {"doc_id": "c", "grade": 1}])
    assert values(case, make_execution(["a", "x", "y"]), k=1)["ndcg"] == 1.0
    assert values(case, make_execution(["a", "b", "c"]), k=2)["ndcg"] == 1.0


def test_chunk_units_count_each_chunk():
    case = make_case([{"doc_id": "a", "chunk_id": "1"}, {"doc_id": "a", "chunk_id": "2"}])
    execution = make_execution([("a", "3"), ("a", "1"), ("b", "1")])
    by_doc, by_chunk = values(case, execution, k=1), values(case, execution, k=1, unit="chunk")
    assert by_doc == {"hit_rate": 1.0, "recall": 1.0, "mrr": 1.0, "ndcg": 1.0, "ndcg_exp": 1.0}
    assert by_chunk["hit_rate"] == 0.0 and by_chunk["mrr"] == 0.0 and by_chunk["ndcg"] == 0.0
    chunk_k2 = values(case, execution, k=2, unit="chunk")
    assert chunk_k2["recall"] == 0.5 and chunk_k2["mrr"] == 0.5


def test_chunk_unit_falls_back_to_doc_for_labels_without_a_chunk_id():
    # a labels its whole document, b one chunk: a's chunks all stand for a, counted once, at the first
    case = make_case([{"doc_id": "a"}, {"doc_id": "b", "chunk_id": "1"}])
    execution = make_execution([("x", "1"), ("a", "3"), ("a", "1"), ("b", "2"), ("b", "1")])
    got = values(case, execution, k=3, unit="chunk")  # deduplicated ranking: x#1, a, b#2, b#1
    assert got["hit_rate"] == 1.0 and got["mrr"] == 0.5 and got["recall"] == 0.5
    full = values(case, execution, k=4, unit="chunk")
    assert full["recall"] == 1.0
    assert full["ndcg"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3)), abs=1e-12)
    assert HitRate(HitRateOptions(k=1, relevance_unit="chunk")).exclude(make_case([{"doc_id": "a"}])) is None


def test_duplicates_count_once_at_their_first_position():
    case = make_case([{"doc_id": "a"}, {"doc_id": "b"}])
    execution = make_execution(["x", "x", "a", "a", "x", "b"])
    got = values(case, execution, k=3)  # deduplicated ranking: x, a, b
    assert got["hit_rate"] == 1.0 and got["mrr"] == 0.5 and got["recall"] == 1.0
    assert got["ndcg"] == pytest.approx((1 / math.log2(3) + 1 / 2) / (1 + 1 / math.log2(3)), abs=1e-12)


def test_k_larger_than_the_ranking():
    case = make_case([{"doc_id": "a"}, {"doc_id": "b"}])
    got = values(case, make_execution(["x", "a"]), k=50)
    assert got["hit_rate"] == 1.0 and got["recall"] == 0.5 and got["mrr"] == 0.5
    assert got["ndcg"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)), abs=1e-12)
    assert values(case, make_execution([]), k=50) == dict.fromkeys(got, 0.0)


def test_scores_never_reorder_the_ranking():
    case = make_case([{"doc_id": "a"}])
    execution = Execution(artifacts={"retrieval/v1": ({"query": "?", "depth": 2, "candidates": [
        {"doc_id": "x", "score": 0.1}, {"doc_id": "a", "score": 0.9}]},)})
    assert values(case, execution, k=1)["hit_rate"] == 0.0
    assert values(case, execution, k=2)["mrr"] == 0.5


@pytest.mark.parametrize("labels", [None, [], [{"doc_id": "a", "grade": 0}]])
def test_no_relevance_labels_is_excluded(labels):
    case = make_case(labels)
    for evaluator in evaluators(3).values():
        assert evaluator.exclude(case) == "no_relevance_labels"
        assert evaluator.evaluate(case, make_execution(["a"])) == Judgment.excluded("no_relevance_labels")


def test_no_retrieval_recorded_is_missing():
    case = make_case([{"doc_id": "a"}])
    for evaluator in evaluators(3).values():
        assert evaluator.exclude(case) is None
        assert evaluator.evaluate(case, Execution(output="x")) == Judgment.missing("no_retrieval_recorded")


def test_the_last_retrieval_recorded_is_read():
    case = make_case([{"doc_id": "a"}])
    assert values(case, make_execution(["a"], ["x"]), k=1)["hit_rate"] == 0.0
    assert values(case, make_execution(["x"], ["a"]), k=1)["hit_rate"] == 1.0


def test_recall_is_pass_fail_at_zero_and_one_and_a_score_between():
    one = make_case([{"doc_id": "a"}])
    two = make_case([{"doc_id": "a"}, {"doc_id": "b"}])
    recall = Recall(RecallOptions(k=2))
    assert recall.evaluate(one, make_execution(["x", "a"])).status == "pass"
    assert recall.evaluate(one, make_execution(["x", "y", "a"])).status == "fail"
    assert recall.evaluate(two, make_execution(["a", "b"])).status == "pass"
    half = recall.evaluate(two, make_execution(["b", "x", "a"]))
    assert (half.status, half.value) == ("score", 0.5)


def test_hit_rate_is_pass_fail_and_mrr_a_score():
    case = make_case([{"doc_id": "a"}])
    assert HitRate(HitRateOptions(k=2)).evaluate(case, make_execution(["x", "a"])).status == "pass"
    assert HitRate(HitRateOptions(k=1)).evaluate(case, make_execution(["x", "a"])).status == "fail"
    assert ReciprocalRank(MrrOptions(k=1)).evaluate(case, make_execution(["a"])).status == "score"


def test_names_metrics_and_reads():
    got = {name: (e.criterion, e.metric, e.reads) for name, e in evaluators(4).items()}
    assert got == {
        "hit_rate": ("hit_rate_at_4", "proportion", ("retrieval/v1",)),
        "recall": ("recall_at_4", "fraction", ("retrieval/v1",)),
        "mrr": ("mrr_at_4", "mean", ("retrieval/v1",)),
        "ndcg": ("ndcg_at_4", "mean", ("retrieval/v1",)),
        "ndcg_exp": ("ndcg_at_4", "mean", ("retrieval/v1",)),
    }
    assert HitRate(HitRateOptions(k=2, criterion="top_two")).criterion == "top_two"


@pytest.mark.parametrize("options", [HitRateOptions, RecallOptions, MrrOptions, NdcgOptions])
def test_options_are_checked(options):
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ConfigError, match="k must be a whole number >= 1"):
            options(k=bad)
    with pytest.raises(ConfigError, match="relevance_unit must be doc or chunk.*fix: write relevance_unit: chunk"):
        options(k=1, relevance_unit="chunks")


def test_ndcg_gain_is_checked():
    with pytest.raises(ConfigError, match="gain must be linear or exponential.*fix: write gain: exponential"):
        NdcgOptions(k=1, gain="exp")


def test_registered_through_entry_points():
    names = {ep.name: ep.value for ep in entry_points(group="oloproof")}
    for name in ("hit_rate", "recall", "mrr", "ndcg", "citation_validity"):
        assert names.get(name) == f"oloproof_{name}"


# -- through the real command line: the documented numbers ----------------------------------

APP = '''
from oloproof import Passage, Retrieval, current_case, system

@system(name="rag", version="1", records=["retrieval/v1"])
def run(input):
    docs = input["docs"]
    current_case().retrieval(Retrieval(query="?", depth=10, candidates=[Passage(doc_id=d) for d in docs]))
    return {"answer": "x"}
'''

SUITE = '''system:
  name: rag
  version: "1"
  callable: app:run
cases: cases.jsonl
evaluators:
  - {type: hit_rate, k: HIT_K}
  - {type: recall, k: 2}
  - {type: ndcg, k: 6}
'''


def write_project(root, hit_k: int = 1, records: str = '["retrieval/v1"]'):
    (root / "app.py").write_text(APP.replace('["retrieval/v1"]', records), encoding="utf-8")
    (root / "oloproof.yaml").write_text(SUITE.replace("HIT_K", str(hit_k)), encoding="utf-8")
    rows = [{"id": f"c{i}", "input": {"docs": ["kb-1", "kb-2"] if i < 10 else ["x", "kb-1"] if i < 12 else ["x"]},
             "expected": {"relevant": [{"doc_id": "kb-1"}]}} for i in range(13)]
    rows.append({"id": "unlabelled", "input": {"docs": ["kb-1"]}, "expected": {}})
    (root / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def oloproof_run(root) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "oloproof", "run"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_a_run_prints_the_documented_intervals(tmp_path):
    write_project(tmp_path)
    result = oloproof_run(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = {line.split()[1]: line for line in result.stdout.splitlines() if "_at_" in line and line.startswith("│")}
    assert re.search(r"10 / 13 observed · 0 missing · 1 excluded", lines["hit_rate_at_1"])
    assert re.search(r"92\.3%\s.*\[63\.9%, 99\.9%\].*12 / 13 observed · 0 missing · 1 excluded",
                     lines["recall_at_2"])
    assert re.search(r"0\.866\s.*\[0\.506, 0\.990\].*mean of 13 observed · 0 missing · 1 excluded",
                     lines["ndcg_at_6"])


def test_a_bad_k_is_a_located_config_error(tmp_path):
    write_project(tmp_path, hit_k=0)
    result = oloproof_run(tmp_path)
    assert result.returncode == 2
    assert "oloproof.yaml:7:22: $.evaluators[0].k: k must be a whole number >= 1, got 0" in result.stderr


def test_a_system_that_records_no_retrieval_is_refused(tmp_path):
    write_project(tmp_path, records="[]")
    result = oloproof_run(tmp_path)
    assert result.returncode == 2
    assert "evaluator 'hit_rate' reads retrieval/v1, which system 'rag' does not record" in result.stderr
