"""citation_validity: checked against a plain reference on random answers, and by hand."""

from __future__ import annotations

import numpy as np
import pytest

from oloproof import Case, Execution, Judgment
from oloproof_citation_validity import CitationValidity, Options

CASE = Case(id="q", input={"question": "?"})


def make_execution(cited: list[str] | None, items: list[dict] | None, dropped: list[dict] = ()) -> Execution:
    artifacts = {}
    if cited is not None:
        artifacts["citations/v1"] = ({"ids": list(cited)},)
    if items is not None:
        artifacts["context/v1"] = ({"items": items, "dropped": list(dropped), "token_budget": None,
                                    "source": "retrieval"},)
    return Execution(output={"answer": "x"}, artifacts=artifacts)


def judge(cited, items, dropped=(), *, require: bool = False) -> Judgment:
    evaluator = CitationValidity(Options(require_citations=require))
    return evaluator.evaluate(CASE, make_execution(cited, items, dropped))


def names_an_item(cited: str, item: dict) -> bool:
    """The reference rule, written out: doc_id, doc_id#chunk_id, or chunk_id of the item."""
    if cited == item["doc_id"]:
        return True
    chunk = item.get("chunk_id")
    return chunk is not None and (cited == chunk or cited == item["doc_id"] + "#" + chunk)


def test_matches_the_reference_on_random_answers():
    rng = np.random.default_rng(20240611)
    outcomes = {"pass": 0, "fail": 0}
    for _ in range(400):
        entries = []
        for position in range(1, int(rng.integers(0, 7)) + 1):
            entry = {"doc_id": f"d{int(rng.integers(12))}", "position": position}
            if rng.random() < 0.6:
                entry["chunk_id"] = f"c{int(rng.integers(4))}"
            entries.append(entry)
        given = [e for e in entries if rng.random() < 0.6]
        dropped = [{**e, "reason": "top_k"} for e in entries if e not in given]
        pool = [f"d{int(rng.integers(12))}", f"c{int(rng.integers(4))}",
                f"d{int(rng.integers(12))}#c{int(rng.integers(4))}"]
        for e in entries:
            pool += [e["doc_id"]] + ([e["chunk_id"], f"{e['doc_id']}#{e['chunk_id']}"] if "chunk_id" in e else [])
        cited = [str(rng.choice(pool)) for _ in range(int(rng.integers(0, 4)))]
        require = bool(rng.random() < 0.5)
        want = all(any(names_an_item(c, item) for item in given) for c in cited) and (bool(cited) or not require)
        got = judge(cited, given, dropped, require=require)
        assert got.status == ("pass" if want else "fail"), (cited, given, require)
        assert got.value == float(want)
        outcomes[got.status] += 1
    assert min(outcomes.values()) > 50  # the draw exercises both outcomes


def test_every_form_of_an_item_id_is_valid():
    items = [{"doc_id": "kb-01", "position": 1, "chunk_id": "p3"}, {"doc_id": "kb-02", "position": 2}]
    assert judge(["kb-01", "kb-01#p3", "p3", "kb-02"], items).status == "pass"


def test_a_citation_outside_the_context_fails_and_is_named():
    items = [{"doc_id": "kb-01", "position": 1, "chunk_id": "p3"}]
    got = judge(["kb-01", "kb-09", "kb-01#p4"], items)
    assert got == Judgment.failed("cites_outside_context", invalid=["kb-09", "kb-01#p4"])


def test_a_dropped_passage_is_not_in_the_context():
    items = [{"doc_id": "kb-01", "position": 1}]
    dropped = [{"doc_id": "kb-02", "position": 2, "reason": "token_budget"}]
    assert judge(["kb-02"], items, dropped).status == "fail"
    assert judge(["kb-01"], items, dropped).status == "pass"


def test_citing_nothing_passes_unless_citations_are_required():
    items = [{"doc_id": "kb-01", "position": 1}]
    assert judge([], items) == Judgment.passed("no_citations")
    assert judge([], items, require=True) == Judgment.failed("no_citations")
    assert judge(["kb-01"], items, require=True).status == "pass"


def test_an_empty_context_makes_every_citation_invalid():
    assert judge(["kb-01"], []).status == "fail"
    assert judge([], []).status == "pass"


def test_missing_records_are_missing():
    items = [{"doc_id": "kb-01", "position": 1}]
    assert judge(None, items) == Judgment.missing("no_citations_recorded")
    assert judge(["kb-01"], None) == Judgment.missing("no_context_recorded")


def test_the_last_records_are_read():
    execution = Execution(artifacts={
        "citations/v1": ({"ids": ["kb-09"]}, {"ids": ["kb-01"]}),
        "context/v1": ({"items": [{"doc_id": "kb-09", "position": 1}], "dropped": []},
                       {"items": [{"doc_id": "kb-01", "position": 1}], "dropped": []}),
    })
    assert CitationValidity(Options()).evaluate(CASE, execution).status == "pass"


def test_name_metric_and_reads():
    evaluator = CitationValidity(Options())
    assert (evaluator.criterion, evaluator.metric, evaluator.reads) == (
        "citations_valid", "proportion", ("citations/v1", "context/v1"))
    assert CitationValidity(Options(criterion="cites_context")).criterion == "cites_context"


@pytest.mark.parametrize("require", [False, True])
def test_options_keep_their_types(require):
    assert Options(require_citations=require).require_citations is require
