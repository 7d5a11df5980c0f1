"""Text and values from outside, made storable at one boundary (oloproof_core/model/untrusted.py),
through the real command line on both stores: a lone surrogate is escaped and the record says so;
NaN, 1e400, a set, bytes, a datetime, a 5,000-deep list, an integer past Python's digits are the
error of that case only; a service's NaN, duplicate key or 100,000-deep body is that case's
`invalid_json`, retried; a judge's reply with a lone surrogate is kept, and paid for once."""

from __future__ import annotations

import json

import pytest
from conftest import Project
from hostile import STORES, http_config, olo_env, on_store, records, replay_judge, run_id, serve

APP = r'''
import datetime
from oloproof import system

@system(name="hostile", version="1")
def run(input):
    k = input["k"]
    if k == "surrogate":
        return {"answer": "ok, cut in an emoji \ud83d"}
    if k == "surrogate_key":
        return {"answer": "ok", "a\udc80": 1}
    if k == "nan":
        return {"answer": float("nan")}
    if k == "overflow":
        return {"answer": float("1e400")}
    if k == "set":
        return {"answer": {1, "a"}}
    if k == "bytes":
        return {"answer": b"\xff"}
    if k == "datetime":
        return {"answer": datetime.datetime(2026, 1, 1)}
    if k == "deep":
        value = []
        for _ in range(5000):
            value = [value]
        return {"answer": value}
    if k == "huge_int":
        return {"answer": 10 ** 5000}
    if k == "error":
        raise RuntimeError("bad byte \udcff and \x1b[31mcolour")
    return {"answer": "ok"}
'''
KINDS = ["fine", "surrogate", "surrogate_key", "nan", "overflow", "set", "bytes", "datetime", "deep", "huge_int",
         "error"]
PROBLEMS = {"nan": "$.output.answer: NaN", "overflow": "$.output.answer: Infinity",
            "set": "$.output.answer: a value of type set is not JSON",
            "bytes": "$.output.answer: a value of type bytes", "datetime": "$.output.answer: a value of type datetime",
            "deep": "nested more than 200 levels deep", "huge_int": "an integer of more than 4300 digits"}
CONFIG = """
system:
  name: hostile
  version: "1"
  callable: app:run
cases: cases.jsonl
concurrency: 2
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
"""


def hostile_project(tmp_path, request, kind: str) -> Project:
    project = Project(tmp_path)
    project.write("app.py", APP)
    project.write("oloproof.yaml", CONFIG + replay_judge())
    # the judge's rationale ends in half of a surrogate pair, as a reply cut mid-emoji would
    project.write("replies.jsonl", json.dumps({"match": "RUBRIC-MARK", "verdict": "pass",
                                               "rationale": "fine \ud83d"}) + "\n")
    project.cases([{"id": k, "input": {"k": k}, "expected": {"answer": "ok"}} for k in KINDS])
    return on_store(request, project, kind)


@pytest.mark.parametrize("kind", STORES)
def test_hostile_outputs_cost_their_own_case_only(tmp_path, request, kind):
    project = hostile_project(tmp_path, request, kind)
    first = olo_env(project, "run")
    assert first.code == 0, first  # no policy: exit 0, whatever the cases returned
    assert "Traceback" not in first.text
    got = records(project, run_id(first))
    assert set(got) == set(KINDS)
    assert got["fine"]["judgments"]["answer_correct"]["status"] == "pass"
    # a lone surrogate is escaped as its text, and the record names where
    assert got["surrogate"]["output"]["answer"] == "ok, cut in an emoji \\ud83d"
    assert got["surrogate"]["escaped"] == ["$.output.answer"]
    assert got["surrogate"]["judgments"]["answer_correct"]["status"] == "pass"
    assert got["surrogate_key"]["output"] == {"answer": "ok", "a\\udc80": 1}
    assert got["surrogate_key"]["escaped"] == ["$.output.a\\udc80"]
    for key, problem in PROBLEMS.items():
        assert got[key]["missing"].startswith("invalid_output: "), got[key]
        assert problem in got[key]["missing"], got[key]
        assert got[key]["judgments"]["answer_correct"]["status"] == "missing"
    assert got["error"]["missing"] == "error: RuntimeError: bad byte \\udcff and \x1b[31mcolour"
    assert got["error"]["escaped"] == ["$.missing"]
    # the judge's reply: kept with its surrogate escaped, noted in the judgment
    helpful = got["fine"]["judgments"]["helpful"]
    assert helpful["status"] == "pass" and helpful["detail"]["rationale"].endswith("fine \\ud83d"), helpful
    assert helpful["detail"]["escaped"] == ["$.detail.rationale"]
    # paid judgments and finished executions were cached: the next run pays for none again
    second = olo_env(project, "run")
    assert second.code == 0, second
    # fine, surrogate, surrogate_key: the judge's 3 from the cache, the 3 of answer_correct made again (not cached)
    assert "judgment 3 hit/3 miss" in second.out, second.out
    assert "execution 3 hit/8 miss" in second.out, second.out  # the 8 missing cases are never cached
    for args in (("inspect", "latest", "--failures"), ("inspect", "latest", "--case", "surrogate"), ("runs",),
                 ("export", "latest", "--html", "report.html")):
        shown = olo_env(project, *args)
        assert shown.code == 0 and "Traceback" not in shown.text, (args, shown)
        assert "\x1b" not in shown.out, (args, shown.out)  # terminal escapes are printed escaped
    checked = olo_env(project, "store", "check")
    assert checked.code == 0, checked


NAN, DUPLICATE = b'{"answer": NaN}', b'{"answer": "ok", "answer": "no"}'
BODIES = {"nan": NAN, "duplicate": DUPLICATE, "overflow": b'{"answer": 1e400}',
          "deep": b'{"answer": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
          "deep_object": b'{"answer": ' + b'{"a": ' * 300 + b"1" + b"}" * 300 + b"}",
          "surrogate": b'{"answer": "ok \\ud800"}', "not_utf8": b'{"answer": "ok \xff"}'}


@pytest.mark.parametrize("kind", STORES)
def test_a_service_body_that_is_not_strict_json_is_retried_then_invalid_json(tmp_path, request, kind):
    served = serve(BODIES)
    try:
        project = Project(tmp_path)
        project.write("oloproof.yaml", http_config(served.url))
        project.cases([{"id": k, "input": {"k": k}, "expected": {"answer": "ok"}} for k in ["fine", *BODIES]])
        on_store(request, project, kind)
        result = olo_env(project, "run")
        assert result.code == 0, result
        got = records(project, run_id(result))
    finally:
        served.stop()
    want = {"nan": "invalid_json: NaN is not a JSON number",
            "duplicate": "invalid_json: duplicate key 'answer'",
            "overflow": "invalid_json: 1e400 is too large for a number",
            "deep": "invalid_json: nested more than 200 levels deep",
            "deep_object": "invalid_json: nested more than 200 levels deep",
            "not_utf8": "invalid_json"}
    for key, reason in want.items():
        assert got[key]["missing"] == reason, got[key]
        assert served.server.attempts[key] == 3, key  # retried, as any 2xx that is not JSON
    assert served.server.attempts["fine"] == 1 and "missing" not in got["fine"]
    assert got["surrogate"]["output"] == {"answer": "ok \\ud800"} and got["surrogate"]["escaped"] == ["$.output.answer"]


class Refusing:
    """A store whose writes refuse any batch holding the value "bad" (as a driver refuses text it
    cannot encode), and fail whole when ``full`` (a full disk)."""

    def __init__(self):
        self.kept, self.full = {}, False

    def cache_put_many(self, ns, items):
        items = list(items)
        if self.full:
            raise OSError(28, "No space left on device")
        if any(v == "bad" for _, v in items):
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        self.kept.update(items)


def test_a_refused_cache_batch_is_written_row_by_row():
    from oloproof_core.storage.cache_writer import CacheWriter

    store = Refusing()
    writer = CacheWriter(store, "judgment", delay=0.05)
    for i in range(10):
        writer.put(f"k{i}", "bad" if i == 3 else i)
    writer.close()  # one bad row costs one value, never the batch or the run
    assert store.kept == {f"k{i}": i for i in range(10) if i != 3} and writer.dropped == 1
    store.full = True
    writer = CacheWriter(store, "judgment", delay=0.05)
    writer.put("k", 1)
    with pytest.raises(OSError):
        writer.close()  # the store's own failure is still the run's error


def test_a_refused_run_batch_is_written_row_by_row():
    from oloproof_core.storage.runs import RunWriter

    class Writer(RunWriter):
        def __init__(self):
            super().__init__("run_x")
            self.rows = []

        def _insert(self, rows):
            if any("bad" in row[2] for row in rows):
                raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
            self.rows += rows

        def _finish(self, header, summary, seal):
            self.seal = seal

        def _remove(self):
            self.rows = []

    writer = Writer()
    records = [{"id": f"c{i}", "case": {"id": f"c{i}", "input": {}, "expected": {}, "metadata": {}},
                "output": "bad" if i == 1 else "fine", "artifacts": {}, "judgments": {}} for i in range(3)]
    writer.add(records)
    writer.finish({"id": "run_x"}, {})
    assert [json.loads(r[2]).get("missing") for r in writer.rows] == [None, "unstorable: UnicodeEncodeError", None]
    assert json.loads(writer.seal)["cases"] == 3


@pytest.mark.slow
def test_a_dataset_column_of_nan_bytes_or_timestamps_is_the_files_located_error(project):
    datasets = pytest.importorskip("datasets")
    import datetime

    base = {"id": "c1", "input.q": "answer 1", "expected.answer": "answer 1"}
    for column, cell, problem in (("input.score", float("nan"), "$.input.score: NaN is not a JSON number"),
                                  ("input.blob", b"\xff", "$.input.blob: a value of type bytes is not JSON"),
                                  ("input.when", datetime.datetime(2026, 1, 1),
                                   "$.input.when: a value of type datetime is not JSON")):
        folder = project.root / f"hf_{column.split('.')[1]}"
        datasets.Dataset.from_list([{**base, column: cell}]).save_to_disk(str(folder))
        project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text().split("cases:")[0]
                      + f"cases: {{hf: {folder.name}}}\nevaluators:\n"
                        "  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}\n")
        result = project.run("run")
        assert result.code == 2, result
        assert f"hf:{folder.name} row 0: {problem}" in result.err, result.err
        assert len(result.err.strip().splitlines()) == 1 and project.runs() == []


def test_a_yaml_case_with_a_lone_surrogate_escape_is_the_files_located_error(project):
    project.write("cases.yaml", '- id: a\n  input: {q: "x\\ud800"}\n')
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text().replace("cases.jsonl", "cases.yaml"))
    result = project.run("run")
    assert result.code == 2, result
    assert "cases.yaml: $[0].input.q: a lone surrogate escape is not text" in result.err, result.err
