"""The conformance kit's tests of ``query_cases`` (docs/stores.md): a part of ``StoreContract``.
A store with the method must answer as the scan of ``oloproof_core.storage.query`` does; a store
without it is skipped (the viewer scans its runs instead)."""

from __future__ import annotations

import pytest

from oloproof_core.model.errors import ConfigError
from oloproof_core.storage.contract_data import SUMMARY, run_header
from oloproof_core.storage.query import scan_cases

QUERIED = "run_01KIT0000000000000000000Q1"


def queried_records() -> list[dict]:
    """Cases with every status, scores, a missing case, rationales and metadata to search."""
    topics = ["billing", "refunds", "shipping"]
    out = []
    for i in range(40):
        record = {"id": f"q{(i * 7) % 40:03d}",  # ids not in the run's order
                  "case": {"input": {"question": f"How do I handle {topics[i % 3]} number {i}?"},
                           "expected": {"answer": f"answer-{i}"}, "metadata": {"topic": topics[i % 3]}},
                  "output": {"answer": f"Reply {i} about {topics[(i + 1) % 3]}"},
                  "judgments": {"correct": {"status": "pass" if i % 4 else "fail", "value": i % 4 != 0,
                                            "reason": "matched" if i % 4 else "wrong refund amount"},
                                "grade": {"status": "score", "value": round((i * 37 % 100) / 100, 2),
                                          "detail": {"rationale": f"the reply cites {'Zebrafish' if i == 17 else 'policy'}"}}}}
        if i % 10 == 9:
            record = {**record, "missing": "timeout after 30s", "output": None,
                      "judgments": {"correct": {"status": "missing", "value": None}}}
        if i == 5:
            record["judgments"]["grade"] = {"status": "excluded", "value": None}
        out.append(record)
    return out


QUERIES = [
    {}, {"offset": 35}, {"desc": True, "limit": 7},
    {"search": "refund"}, {"search": "zebra"}, {"search": "topic=shipping"}, {"search": "REPLY 1"},
    {"search": "timeout"}, {"search": "nothing-like-this"},
    {"status": "failed"}, {"status": "missing"}, {"status": "excluded"},
    {"criterion": "correct", "status": "passed"}, {"criterion": "grade", "status": "scored"},
    {"failing": ["correct"]}, {"failing": []},
    {"sort": "case"}, {"sort": "case", "desc": True, "offset": 3, "limit": 9},
    {"sort": "grade"}, {"sort": "grade", "desc": True}, {"sort": "correct", "limit": 12},
    {"sort": "grade", "search": "billing", "criterion": "correct", "status": "passed", "limit": 5},
]


class QueryContract:
    """What ``store.query_cases(run_id, search=, criterion=, status=, failing=, sort=, desc=,
    offset=, limit=)`` answers: the same page as a scan of the run."""

    @staticmethod
    def _stored(store):
        if not hasattr(store, "query_cases"):
            pytest.skip("the store has no query_cases(): the viewer scans run_cases instead")
        records = queried_records()
        store.save_run(run_header(QUERIED, len(records)), records, SUMMARY)
        return records

    @pytest.mark.parametrize("query", QUERIES, ids=[str(q) for q in QUERIES])
    def test_query_cases_answers_as_the_scan_does(self, store, query):
        records = self._stored(store)
        found = store.query_cases(QUERIED, **query)
        scanned = scan_cases(records, **{"limit": 50, **query})
        expected = sorted(scanned["wanted"], key=scanned["wanted"].get)
        assert found["matching"] == scanned["matching"], query
        assert [r["id"] for r in found["records"]] == [records[i]["id"] for i in expected], query
        assert found["records"] == [records[i] for i in expected], "whole records, as stored"

    def test_query_cases_finds_what_the_words_say(self, store):
        self._stored(store)
        assert [r["id"] for r in store.query_cases(QUERIED, search="zebrafish")["records"]] == ["q039"]
        assert store.query_cases(QUERIED, search="wrong refund")["matching"] == 10
        assert store.query_cases(QUERIED, failing=["correct"])["matching"] == 14  # 10 failed, 4 missing
        assert store.query_cases(QUERIED, search="", limit=0)["matching"] == 40

    def test_query_cases_of_an_unknown_run_and_a_bad_status(self, store):
        self._stored(store)
        with pytest.raises(ConfigError):
            store.query_cases("run_01KIT0000000000000000000Q9")
        with pytest.raises(ValueError, match="status"):
            store.query_cases(QUERIED, status="broken")
