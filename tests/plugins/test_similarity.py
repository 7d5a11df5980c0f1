"""The ``similarity`` evaluator and the embeddings providers: the cosine between the answer and
the expected answer, against the local stand-in's ``/v1/embeddings`` and the replay provider,
cached per (text, model identity)."""

from __future__ import annotations

import json
import re

import pytest

from conftest import Project
from oloproof import Case, ConfigError, EvaluationError, Execution, open_embedder
from oloproof_similarity import Options, Similarity
from provider_standin import Fault, StandIn

REFUND = "Refunds for annual plans are issued within 14 days of an approved request."
PARAPHRASE = "An approved refund request on an annual plan is issued in 14 days."
UNRELATED = "The API rate limit is 100 requests per minute for each key."


def similarity(standin: StandIn, **options) -> Similarity:
    return Similarity(Options(provider="openai", model="bag-of-words",
                              provider_options={"base_url": standin.openai_url, "api_key_env": None, "retries": 0},
                              **options))


def judge(evaluator: Similarity, answer: str, expected: str = REFUND):
    case = Case(id="c", input={"question": "refunds?"}, expected={"answer": expected})
    return evaluator.evaluate(case, Execution(output={"answer": answer}))


def test_a_paraphrase_scores_above_unrelated_text_and_the_threshold_decides():
    with StandIn() as standin:
        evaluator = similarity(standin, threshold=0.5)
        close, far = judge(evaluator, PARAPHRASE), judge(evaluator, UNRELATED)
        assert close.detail["similarity"] > 0.5 > far.detail["similarity"]
        assert (close.status, far.status, far.reason) == ("pass", "fail", "below_threshold")
        assert evaluator.metric == "proportion"
        body = standin.requests[0]["body"]
        assert body == {"model": "bag-of-words", "input": [PARAPHRASE, REFUND]}  # one request for both texts
        scored = similarity(standin, threshold=None)
        assert scored.metric == "mean" and judge(scored, PARAPHRASE).value == pytest.approx(close.detail["similarity"])


def test_each_text_is_embedded_once_per_model_through_the_bound_cache():
    class Cache(dict):
        def put(self, key, value):
            self[key] = value

    with StandIn() as standin:
        evaluator, cache = similarity(standin), Cache()
        evaluator.bind_cache(cache)
        judge(evaluator, PARAPHRASE)
        again = judge(evaluator, UNRELATED)  # the expected answer comes from the cache
        assert [r["body"]["input"] for r in standin.requests] == [[PARAPHRASE, REFUND], [UNRELATED]]
        assert again.detail["cached_texts"] == 1
        other = Similarity(Options(provider="openai", model="another-model", provider_options={
            "base_url": standin.openai_url, "api_key_env": None}))
        other.bind_cache(cache)
        judge(other, PARAPHRASE)  # another model: nothing of the first one's is reused
        assert standin.requests[-1]["body"]["input"] == [PARAPHRASE, REFUND]


def test_a_failing_server_makes_the_judgment_an_evaluation_error():
    with StandIn() as standin:
        evaluator = similarity(standin)
        standin.faults.append(Fault(500))
        with pytest.raises(EvaluationError, match="provider_error: 500"):
            judge(evaluator, PARAPHRASE)
        standin.faults.append(Fault("malformed"))
        with pytest.raises(EvaluationError, match="provider_error: invalid_json"):
            judge(evaluator, PARAPHRASE)


def test_replay_embeddings_and_a_provider_without_embeddings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vectors.jsonl").write_text(
        json.dumps({"match": "14 days", "embedding": [1, 0]}) + "\n"
        + json.dumps({"match": "rate limit", "embedding": [0, 1]}) + "\n", encoding="utf-8")
    evaluator = Similarity(Options(provider="replay", model="replay", provider_options={"file": "vectors.jsonl"}))
    assert judge(evaluator, PARAPHRASE).detail["similarity"] == 1.0
    assert judge(evaluator, UNRELATED).detail["similarity"] == 0.0
    with pytest.raises(EvaluationError, match="replay_no_embedding"):
        judge(evaluator, "Nothing matches this.")
    with pytest.raises(ConfigError, match="serves no embeddings"):
        open_embedder("anthropic", "claude", {"api_key_env": None}, what="evaluator 'similarity'")
    with pytest.raises(ConfigError, match="threshold must be a number between -1 and 1"):
        Options(provider="replay", model="replay", threshold=2)


SUITE = """
system:
  name: echo
  version: "1"
  callable: app:run
cases: cases.jsonl
evaluators:
  - {type: similarity, provider: openai, model: bag-of-words, threshold: 0.5,
     provider_options: {base_url: "URL", api_key_env: null}}
"""


@pytest.mark.slow
def test_cache_false_asks_the_embedder_on_every_run_and_keeps_no_vector(tmp_path):
    # cache: false on a judge: its judgments and its finer cache (the vectors, bind_cache) are
    # neither read nor written, so every run asks the provider again
    from conftest import APP

    project = Project(tmp_path)
    project.write("app.py", APP)
    project.cases([{"id": "close", "input": {"q": PARAPHRASE}, "expected": {"answer": REFUND}},
                   {"id": "far", "input": {"q": UNRELATED}, "expected": {"answer": REFUND}}])
    with StandIn() as standin:
        project.write("oloproof.yaml", SUITE.replace("URL", standin.openai_url).replace("threshold: 0.5,",
                                                                                          "threshold: 0.5, cache: false,"))
        first = project.run("run")
        assert first.code == 0 and "1 / 2 observed" in first.out, first
        asked = len(standin.requests)
        assert asked > 0
        second = project.run("run")
        assert "judgment 0 hit/2 miss" in second.out and "1 / 2 observed" in second.out, second
        assert len(standin.requests) == 2 * asked  # asked again, as the first run did
    assert re.search(r"│ judgment +│ 0 +│", project.run("cache").out)  # no judgment row, no vector


@pytest.mark.slow
def test_a_run_scores_similarity_from_the_standin_and_the_second_run_asks_nothing(tmp_path):
    from conftest import APP

    project = Project(tmp_path)
    project.write("app.py", APP)
    project.cases([{"id": "close", "input": {"q": PARAPHRASE}, "expected": {"answer": REFUND}},
                   {"id": "far", "input": {"q": UNRELATED}, "expected": {"answer": REFUND}},
                   {"id": "none", "input": {"q": UNRELATED}, "expected": {}}])
    with StandIn() as standin:
        project.write("oloproof.yaml", SUITE.replace("URL", standin.openai_url))
        first = project.run("run")
        assert first.code == 0, first
        assert "answer_similar" in first.out and "1 / 2 observed · 0 missing · 1 excluded" in first.out
        asked = len(standin.requests)
        assert asked == 2
        second = project.run("run")
        assert "judgment 2 hit/0 miss" in second.out and len(standin.requests) == asked
        project.write("oloproof.yaml", SUITE.replace("URL", standin.openai_url).replace("0.5,", "2,"))
        bad = project.run("run")
        assert bad.code == 2 and "threshold must be a number between -1 and 1" in bad.text
        assert "fix: write threshold: 0.8" in bad.text
