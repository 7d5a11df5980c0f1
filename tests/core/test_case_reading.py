"""Reading case files fast without reading them less strictly: a JSON line is parsed by the plain
scanner when no key can be duplicated, and a large file's run pass rebuilds the cases its check
read without checking those bytes again, so a file that changes in between must still stop it."""

from __future__ import annotations

import json
import random
import sys

import pytest

import oloproof
from oloproof_core.config import cases as cases_module
from oloproof_core.config import documents as config_module
from oloproof_core.engine import runner
from oloproof_core.config.documents import SeenIds
from oloproof_core.model.errors import ConfigError
from oloproof_core.config.files import _strict_line, parse_json_line, parse_plain

from conftest import case

CHANGED = "cases.jsonl changed after its cases were checked"


@pytest.fixture
def fresh(monkeypatch, project):
    """``oloproof.run`` in this process, on the project's app, with sys.path restored after."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "app", raising=False)
    monkeypatch.chdir(project.root)
    return project


COUNTING_APP = '''
    from pathlib import Path
    from oloproof import system

    @system(name="echo", version="1")
    def run(input):
        with Path("called.txt").open("a") as f:
            f.write(input["q"] + "\\n")
        return {"answer": input["q"]}
'''


def _rewrite_line(path, number: int, text: str) -> None:
    """Line ``number`` (1-based) replaced in place by ``text``, padded to its length: the file keeps
    its size and every other byte, only its modification time says it changed."""
    lines = path.read_bytes().split(b"\n")
    old = lines[number - 1]
    new = text.encode()
    assert len(new) <= len(old), "the replacement fits in the line"
    lines[number - 1] = new + b" " * (len(old) - len(new))
    path.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("replacement", [
    '{"id": "c001", "input": {"q": "answer 1"}, "input": {"q": "twice"}}',  # a duplicate key
    '{"id": "c000", "input": {"q": "answer 0"}}',  # a duplicate id
    '{"id": "c001", "input": {"q": NaN}}',  # not strict JSON
    '{"id": "c001", "input": {"q": "edited"}}',  # still a valid case: only the stamp tells
])
def test_a_file_changed_between_the_check_and_the_run_stops_it_before_any_case(fresh, monkeypatch, replacement):
    fresh.write("app.py", COUNTING_APP)
    fresh.cases([case(i) for i in range(40)])
    monkeypatch.setattr(cases_module, "HELD_BYTES", 100)  # a CaseStream: checked, then read again by the run
    checked = cases_module.CaseStream.check

    def check_then_edit(self, visit=None):
        checked(self, visit)
        _rewrite_line(self.path, 2, replacement)

    monkeypatch.setattr(cases_module.CaseStream, "check", check_then_edit)
    with pytest.raises(ConfigError) as stopped:
        oloproof.run(fresh.root / "oloproof.yaml")
    assert str(stopped.value).startswith(f"cases.jsonl: {CHANGED}")
    assert not (fresh.root / "called.txt").exists(), "no case of the changed file reached the system"
    assert fresh.runs() == []


@pytest.mark.parametrize("replacement", [
    "this is not JSON",
    '[1, 2, 3]',  # not an object
    '{"input": {"q": "no id"}}',
    '{"id": "c1500", "input": [1]}',  # a field of the wrong type
    '{"id": "c1500", "input": {"q": "a"}, "input": {"q": "b"}}',  # a duplicate key the plain scanner takes
    '{"id": "c1500", "input": {"q": "answer 1500"}, "bogus": 1}',  # an unknown field
])
def test_a_line_changed_while_the_run_reads_the_file_stops_the_run(fresh, monkeypatch, replacement):
    """The run pass reads the file as it goes: a later line rewritten by the system while the run
    is under way stops the run with the one message, whatever the line became, and stores nothing."""
    fresh.write("app.py", '''
        from pathlib import Path
        from oloproof import system

        @system(name="echo", version="1")
        def run(input):
            if input["q"] == "answer 3":  # line 1501, far past what the reader holds, rewritten in place
                lines = Path("cases.jsonl").read_bytes().split(b"\\n")
                new = ''' + repr(replacement.encode()) + '''
                lines[1500] = new + b" " * (len(lines[1500]) - len(new))
                Path("cases.jsonl").write_bytes(b"\\n".join(lines))
            return {"answer": input["q"]}
    ''')
    fresh.cases([dict(case(i), id=f"c{i:04d}") for i in range(2_000)])
    monkeypatch.setattr(runner, "BATCH", 10)
    monkeypatch.setattr(cases_module, "HELD_BYTES", 100)
    with pytest.raises(ConfigError, match=CHANGED):
        oloproof.run(fresh.root / "oloproof.yaml")
    assert fresh.runs() == []


def test_the_run_pass_builds_the_cases_the_check_built(project, monkeypatch):
    """Every kind of line a case file may hold: the cases a large file's run pass yields are the
    ones its check built and the ones the same file read whole gives: equal, same types, same key
    order, same source."""
    lines = [
        json.dumps({"id": "plain", "input": {"q": "a"}}),
        "",
        "   \t",
        "\u00a0",  # a line of Unicode space is blank too
        '  {"id": "spaced", "input": {"q": "b"}}  ',
        '{"id":"tight","input":{"q":"c:d","n":1e300,"u":1E-400,"big":123456789012345678901234567890,"f":-0.0}}',
        '{"id": "esc\\u00e9", "input": {"q": "\\ud83d\\ude00 \\" \\\\ \\n", "\\u0072": 2}}',
        json.dumps({"id": "nested", "input": {"a": [{"b": [1, {"c": None}]}, True, False]},
                    "expected": {"answer": ["x", "y:z"]}, "metadata": {"topic": "t", "k": {"x": 1}}}),
        json.dumps({"id": "order", "metadata": {"z": 1, "a": 2}, "expected": {}, "input": {"b": 1, "a": 2}}),
        json.dumps({"id": "ünïcödé", "input": {"q": "日本語"}}, ensure_ascii=False),
    ]
    body = "\ufeff" + "\r\n".join(lines) + "\n"
    (project.root / "cases.jsonl").write_text(body, encoding="utf-8", newline="")
    whole = cases_module.load_cases("cases.jsonl", project.root)
    assert isinstance(whole, list)
    monkeypatch.setattr(cases_module, "HELD_BYTES", 10)
    stream = cases_module.load_cases("cases.jsonl", project.root)
    assert isinstance(stream, cases_module.CaseStream)
    checked = []
    stream.check(checked.append)
    again = list(stream)

    def exact(cases):  # equality, and what equality does not see: key order, int vs float, -0.0
        return [(c.id, c.source, json.dumps(c.to_data()), repr(c.to_data())) for c in cases]

    assert again == checked == whole and len(again) == 7
    assert exact(again) == exact(checked) == exact(whole)
    assert [c.source for c in again][:2] == ["cases.jsonl:1", "cases.jsonl:5"]
    assert all(type(c.expected) is dict and type(c.metadata) is dict for c in again)
    assert again[0].expected is not again[1].expected, "an absent field is an empty object of its own"


# -- the plain scanner's duplicate-key proof, against an independent reading of the pairs ------


def _has_duplicate(text: str) -> bool:
    """Whether any object in ``text`` names a key twice, read as lists of pairs (no dict built)."""
    found = False

    def pairs(items):
        nonlocal found
        keys = [k for k, _ in items]
        found = found or len(set(keys)) != len(keys)
        return items

    json.loads(text, object_pairs_hook=pairs)
    return found


KEYS = ['"a"', '"b"', '"c"', '"\\u0061"', '"k:"', '":"']  # "a" written two ways; keys holding colons
SCALARS = ['"a"', '"b:c"', '":"', '"\\u00e9"', '"x\\u003a"', "1", "2.5", "true", "null", '"{\\"k\\": 1}"']


def _object(rng: random.Random, depth: int = 0) -> str:
    parts = [f"{rng.choice(KEYS)}{rng.choice([':', ': ', ' : '])}{_value(rng, depth)}" for _ in range(rng.randrange(5))]
    return "{" + ", ".join(parts) + "}"


def _value(rng: random.Random, depth: int) -> str:
    roll = rng.random()
    if depth < 4 and roll < 0.3:
        return _object(rng, depth + 1)
    if depth < 4 and roll < 0.45:
        return "[" + ", ".join(_value(rng, depth + 1) for _ in range(rng.randrange(4))) + "]"
    return rng.choice(SCALARS)


def test_a_duplicate_key_is_found_wherever_it_is_whatever_colons_the_line_holds():
    """Seeded random lines (nested objects and arrays, keys escaped or holding colons, colons in
    strings, space around): parse_json_line raises the strict decoder's error exactly when the line
    repeats a key, and otherwise returns the strict decoder's value, as parse_plain does."""
    rng = random.Random(20261202)
    duplicates = 0
    for _ in range(3_000):
        line = rng.choice(["", " ", "\t "]) + _object(rng) + rng.choice(["", "\n", " \r\n"])
        reference = _has_duplicate(line)
        duplicates += reference
        try:
            strict = ("value", _strict_line(line, "f.jsonl:1"))
        except ConfigError as exc:
            strict = ("error", str(exc))
        try:
            got = ("value", parse_json_line(line, "f.jsonl:1"))
        except ConfigError as exc:
            got = ("error", str(exc))
        assert got == strict, line
        assert (got[0] == "error" and "duplicate key" in got[1]) == reference, line
        if got[0] == "value":  # and the run pass's plain reading of a line the check accepted
            assert json.dumps(got[1]) == json.dumps(strict[1]) == json.dumps(parse_plain(line))
    assert 300 < duplicates < 2_700, "both kinds of line were tried"


@pytest.mark.parametrize("line, problem", [
    ('{"a": 1, "a": 2}', "invalid JSON: duplicate key 'a'"),
    ('{"a": "x:y", "a": 1}', "invalid JSON: duplicate key 'a'"),  # a colon in a string hides nothing
    ('{"a": 1, "\\u0061": 2}', "invalid JSON: duplicate key 'a'"),  # the same key, written two ways
    ('{"x": {"a": 1, "a": 2}, "b": NaN}', "invalid JSON: duplicate key 'a'"),  # the first problem in the line
    ('{"b": NaN, "x": {"a": 1, "a": 2}}', "invalid JSON: NaN is not a JSON number"),
    ('{"a": 1, "a": 2} x', "invalid JSON: duplicate key 'a'"),
    ('{"a": 1} x', "invalid JSON: Extra data (column 10)"),
    ('[{"a": [{"b": 1, "b": 1}]}]', "invalid JSON: duplicate key 'b'"),
])
def test_each_strict_json_error_is_the_one_it_was(line, problem):
    with pytest.raises(ConfigError) as raised:
        parse_json_line(line, "f.jsonl:3")
    assert str(raised.value).startswith(f"f.jsonl:3: {problem}")


# -- duplicate ids past the exact part: hashed, sorted without numpy -------------------------------


@pytest.mark.parametrize("sorted_up_to", [0, 10**9])  # split by the top byte and sorted part by part; sorted whole
def test_a_repeated_id_among_many_is_located_by_either_sort(fresh, monkeypatch, sorted_up_to):
    rows = [case(i) for i in range(30)]
    rows[25]["id"] = rows[3]["id"]
    fresh.cases(rows)
    monkeypatch.setattr(SeenIds, "EXACT", 10)
    monkeypatch.setattr(SeenIds, "SORTED", sorted_up_to)
    monkeypatch.setitem(sys.modules, "numpy", None)  # neither sort imports numpy: importing it fails
    with pytest.raises(ConfigError) as raised:
        oloproof.run(fresh.root / "oloproof.yaml")
    assert str(raised.value).startswith("cases.jsonl:26: $.id: duplicate id 'c003' (first on line 4)")
    assert fresh.runs() == []


def test_ids_whose_hashes_collide_are_not_duplicates(fresh, monkeypatch):
    """A repeated hash only sends the check back to the file, which compares the ids themselves:
    every id hashed alike, a file of distinct ids runs, and a true repeat is still located."""
    monkeypatch.setattr(config_module, "_id_digest", lambda case_id: 7)
    monkeypatch.setattr(SeenIds, "EXACT", 10)
    fresh.cases([case(i) for i in range(30)])
    assert oloproof.run(fresh.root / "oloproof.yaml").tally.cases == 30
    rows = [case(i) for i in range(30)]
    rows[29]["id"] = rows[12]["id"]
    fresh.cases(rows)
    with pytest.raises(ConfigError, match=r"cases.jsonl:30: \$.id: duplicate id 'c012' \(first on line 13\)"):
        oloproof.run(fresh.root / "oloproof.yaml")


def test_a_large_file_s_check_finds_a_bad_field_as_a_small_file_s_read_does(project, monkeypatch):
    """Every case is built by the check, with or without an evaluator that reads the cases: a bad
    field stops the check, at its line, before a later problem and before anything runs."""
    rows = [case(i) for i in range(30)]
    rows[20]["input"] = ["not", "an", "object"]
    rows[25]["id"] = rows[3]["id"]  # a later problem: not the one reported
    project.cases(rows)
    with pytest.raises(ConfigError) as whole:
        cases_module.load_cases("cases.jsonl", project.root)
    monkeypatch.setattr(cases_module, "HELD_BYTES", 10)
    stream = cases_module.load_cases("cases.jsonl", project.root)
    with pytest.raises(ConfigError) as streamed:
        stream.check()  # no evaluator's check to hand the cases to
    assert str(streamed.value) == str(whole.value)
    assert str(whole.value).startswith("cases.jsonl:21: $.input: expected a JSON object, got ['not', 'an', 'object']")


@pytest.mark.parametrize("name", ["cases.jsonl", "cases.json"])
def test_an_integer_too_long_for_python_is_a_located_error(project, name):
    """json reads integers of at most sys.get_int_max_str_digits() digits; a longer one is the case
    file's error (exit 2), not an internal one."""
    record = '{"id": "c1", "input": {"q": %s}, "expected": {"answer": "x"}}' % ("1" * 5000)
    project.write(name, record + "\n" if name.endswith(".jsonl") else f"[{record}]\n")
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text().replace("cases.jsonl", name))
    result = project.run("run")
    assert result.code == 2, result.text
    where = "cases.jsonl:1" if name.endswith(".jsonl") else "cases.json"
    assert f"{where}: invalid JSON: an integer of more than 4300 digits" in result.text
    assert project.runs() == []


def test_the_parts_find_every_repeated_hash_and_no_other():
    """Past ``SORTED`` hashes, the 256 parts (by the top byte, negative hashes included) find
    exactly the hashes seen twice."""
    seen = SeenIds(exact=0)
    seen.SORTED = 0
    ids = [f"id-{i}" for i in range(5000)] + ["id-17", "id-4999", "id-2500"]
    for case_id in ids:
        seen.add(case_id, "here")
    assert seen.repeated() == {hash("id-17"), hash("id-4999"), hash("id-2500")}
    assert {h >> 63 for h in seen.digests} == {0, -1}  # both signs were in the parts
    distinct = SeenIds(exact=0)
    distinct.SORTED = 0
    for i in range(5000):
        distinct.add(f"id-{i}", "here")
    assert distinct.repeated() == set()
