"""The built-in checks: regex, json_valid, json_schema, numeric, latency and cost.

Each evaluator on its own (against Python's ``re``, ``pytest.approx`` and hand-worked cases), its
configuration errors through the real command line (one line, the YAML path, exit 2, nothing
stored), and one suite of all six run end to end through a callable system and through an HTTP
service on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import pytest

from conftest import Project, Served
from oloproof import Case, ConfigError, EvaluationError, Execution
from oloproof_cost import Cost
from oloproof_cost import Options as CostOptions
from oloproof_json_schema import Options as SchemaOptions
from oloproof_json_schema import make as make_schema
from oloproof_json_valid import JsonValid
from oloproof_json_valid import Options as ValidOptions
from oloproof_latency import Latency
from oloproof_latency import Options as LatencyOptions
from oloproof_numeric import Numeric, number_in
from oloproof_numeric import Options as NumericOptions
from oloproof_regex import Options as RegexOptions
from oloproof_regex import Regex

CASE = Case(id="q", input={"q": "?"}, expected={"answer": 42})


def out(output, usage: list[dict] | None = None) -> Execution:
    return Execution(output=output, artifacts={"usage/v1": tuple(usage)} if usage is not None else {})


# -- regex -------------------------------------------------------------------------------------


def regex(output, **options):
    return Regex(RegexOptions(criterion="r", **options)).evaluate(CASE, out(output))


@pytest.mark.parametrize("mode", ["search", "match", "fullmatch"])
def test_regex_modes_agree_with_python_re(mode):
    rng = np.random.default_rng(36)
    outcomes = set()
    for _ in range(300):
        text = "".join(rng.choice(list("abAB \n"), size=int(rng.integers(0, 8))))
        pattern = "".join(rng.choice(["a", "b", "a+", "b*", ".", "^", "$", " "], size=int(rng.integers(1, 4))))
        flags = [f for f in ("IGNORECASE", "MULTILINE", "DOTALL") if rng.random() < 0.4]
        bits = 0
        for f in flags:
            bits |= getattr(re, f)
        want = getattr(re.compile(pattern, bits), mode)(text) is not None
        for negate in (False, True):
            got = regex({"answer": text}, field="answer", pattern=pattern, mode=mode, flags=tuple(flags), negate=negate)
            assert got.status == ("pass" if want != negate else "fail"), (text, pattern, flags, negate)
            outcomes.add(got.status)
    assert outcomes == {"pass", "fail"}


def test_regex_reasons_and_non_text_values():
    assert regex({"n": 42}, field="n", pattern=r"^\d+$").status == "pass"  # a number is matched as its JSON text
    assert regex({"a": {"b": 1}}, field="a", pattern='"b": 1').status == "pass"
    absent = regex({"a": "x"}, field="nope", pattern="x")
    assert (absent.status, absent.reason) == ("fail", "field_absent")
    missed = regex("hello", pattern="bye")
    assert (missed.reason, missed.detail["pattern"], missed.detail["mode"]) == ("pattern_not_matched", "bye", "search")
    matched = regex("hello", pattern="l+", negate=True)
    assert (matched.status, matched.reason, matched.detail["matched"]) == ("fail", "pattern_matched", "ll")


def test_regex_options_are_checked_when_built():
    with pytest.raises(ConfigError, match="invalid regular expression 'a\\(b': missing \\)") as bad:
        RegexOptions(criterion="r", pattern="a(b")
    assert bad.value.key == "pattern"
    with pytest.raises(ConfigError, match="unknown regex flag 'IGNORCASE'"):
        RegexOptions(criterion="r", pattern="a", flags=("IGNORCASE",))
    with pytest.raises(ConfigError, match="mode must be one of search, match, fullmatch"):
        RegexOptions(criterion="r", pattern="a", mode="find")


# -- json_valid --------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "status", "error"), [
    ('{"a": [1, 2.5, null, true]}', "pass", None),
    ('  [1]\n', "pass", None),
    ('"text"', "pass", None),
    ('{"a": 1,}', "fail", "Expecting property name"),
    ('{"a": NaN}', "fail", "NaN"),
    ('{"a": 1, "a": 2}', "fail", "duplicate"),
    ('```json\n{"a": 1}\n```', "fail", "Expecting value"),
    ('{"a": "tru', "fail", "Unterminated string"),
    ({"already": "structured"}, "pass", None),
    (7, "pass", None),
])
def test_json_valid(value, status, error):
    got = JsonValid(ValidOptions(criterion="j", field="body")).evaluate(CASE, out({"body": value}))
    assert got.status == status
    if error:
        assert got.reason == "invalid_json" and error.lower() in got.detail["error"].lower()


def test_json_valid_absent_field_fails():
    got = JsonValid(ValidOptions(criterion="j", field="body")).evaluate(CASE, out({"answer": "{}"}))
    assert (got.status, got.reason) == ("fail", "field_absent")


# -- json_schema -------------------------------------------------------------------------------

SCHEMA = {"type": "object", "required": ["total", "items"],
          "properties": {"total": {"type": "number"}, "items": {"type": "array", "items": {"type": "string"}},
                         "email": {"type": "string", "format": "email"}}}


def schema_check(output, tmp_path: Path = Path("."), **options):
    evaluator = make_schema(SchemaOptions(criterion="s", **options), suite_dir=tmp_path)
    return evaluator, evaluator.evaluate(CASE, out(output))


def test_json_schema_passes_a_valid_document_and_names_the_first_error_in_document_order():
    _, ok = schema_check({"json": '{"total": 3, "items": ["a"]}'}, field="json", schema=SCHEMA)
    assert ok.status == "pass"
    # errors at $.items[1] and $.total: the output writes items first, so its error is the reason
    _, bad = schema_check({"json": '{"items": ["a", 3], "total": "x"}'}, field="json", schema=SCHEMA)
    assert (bad.status, bad.reason) == ("fail", "$.items[1]: 3 is not of type 'string'")
    assert (bad.detail["path"], bad.detail["keyword"], bad.detail["errors"]) == ("$.items[1]", "type", 2)
    _, swapped = schema_check({"json": '{"total": "x", "items": ["a", 3]}'}, field="json", schema=SCHEMA)
    assert swapped.reason == "$.total: 'x' is not of type 'number'"
    _, missing_key = schema_check({"total": 1}, schema=SCHEMA)  # a structured output is validated as it is
    assert missing_key.reason == "$: 'items' is a required property"


def test_json_schema_parse_and_formats():
    _, not_json = schema_check({"json": "{oops"}, field="json", schema=SCHEMA)
    assert (not_json.status, not_json.reason) == ("fail", "invalid_json")
    as_text = {"type": "string", "maxLength": 5}
    assert schema_check({"a": "{oops"}, field="a", schema=as_text, parse=False)[1].status == "pass"
    assert schema_check({"a": "too long"}, field="a", schema=as_text, parse=False)[1].status == "fail"
    email = {"total": 1, "items": [], "email": "not an address"}
    assert schema_check(email, schema=SCHEMA)[1].status == "pass"  # format is an annotation by default
    strict = schema_check(email, schema=SCHEMA, formats=True)[1]
    assert (strict.status, strict.reason) == ("fail", "$.email: 'not an address' is not a 'email'")


def test_json_schema_from_a_file_beside_the_suite_and_its_content_in_the_identity(tmp_path):
    (tmp_path / "schemas").mkdir()
    path = tmp_path / "schemas" / "answer.json"
    path.write_text(json.dumps(SCHEMA), encoding="utf-8")
    first, judged = schema_check({"total": 1, "items": []}, tmp_path, schema_file="schemas/answer.json")
    assert judged.status == "pass"
    path.write_text(json.dumps({**SCHEMA, "required": ["total", "items", "email"]}), encoding="utf-8")
    second, judged = schema_check({"total": 1, "items": []}, tmp_path, schema_file="schemas/answer.json")
    assert judged.reason == "$: 'email' is a required property"
    assert first.identity["schema"] != second.identity["schema"] and "jsonschema" in first.identity


def test_json_schema_refs_resolve_within_the_schema_only():
    local = {"$defs": {"n": {"type": "number"}}, "type": "object", "properties": {"total": {"$ref": "#/$defs/n"}}}
    assert schema_check({"total": "x"}, schema=local)[1].reason == "$.total: 'x' is not of type 'number'"
    elsewhere = make_schema(SchemaOptions(criterion="s", schema={"$ref": "https://example.org/order.json"}),
                            suite_dir=Path("."))
    with pytest.raises(EvaluationError, match="^unresolvable_ref: "):
        elsewhere.evaluate(CASE, out({"total": 1}))


@pytest.mark.parametrize(("options", "key", "problem"), [
    ({"schema": {"type": "objct"}}, "schema", "invalid JSON Schema ($.type of the schema): 'objct' is not valid"),
    ({"schema": {"$schema": "http://example.org/mine", "type": "object"}}, "schema", "unknown $schema"),
    ({"schema_file": "absent.json"}, "schema_file", "cannot read schema_file 'absent.json'"),
    ({"schema_file": "broken.json"}, "schema_file", "schema_file 'broken.json' is not JSON"),
    ({}, None, "give the schema either inline (schema:) or as a file (schema_file:)"),
    ({"schema": {"type": "object"}, "schema_file": "x.json"}, None, "give the schema either inline"),
])
def test_json_schema_bad_schemas_are_config_errors(tmp_path, options, key, problem):
    (tmp_path / "broken.json").write_text("{type: object}", encoding="utf-8")
    with pytest.raises(ConfigError) as bad:
        make_schema(SchemaOptions(criterion="s", **options), suite_dir=tmp_path)
    assert bad.value.problem.startswith(problem) and bad.value.key == key


# -- numeric -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "last", "number"), [
    (42, False, 42.0), (2.5, False, 2.5), (True, False, None), ("no digits", False, None),
    ("The total is 1,234.5 km", False, 1234.5), ("between 3 and 7", True, 7.0), ("-0.5e3 degrees", False, -500.0),
    ("COVID-19 counts: 12", True, 12.0), ("COVID-19", False, 19.0), ("about .25", False, 0.25),
    ("on 2024-05-01", True, 1.0), ("−7 (a minus sign)", False, -7.0), ({"n": 1}, False, None),
])
def test_number_in(value, last, number):
    assert number_in(value, last) == number


def test_numeric_tolerance_agrees_with_pytest_approx():
    rng = np.random.default_rng(8)
    outcomes = set()
    for _ in range(2000):
        want = float(rng.choice([0.0, rng.normal(0, 100), float(rng.integers(-50, 50))]))
        got = want + float(rng.choice([0.0, rng.normal(0, 1), rng.normal(0, 0.01)]))
        abs_tol = float(rng.choice([0.0, 0.01, 0.5])) if rng.random() < 0.6 else None
        rel_tol = float(rng.choice([0.0, 0.001, 0.01])) if rng.random() < 0.6 else None
        case = Case(id="n", input={}, expected={"value": want})
        evaluator = Numeric(NumericOptions(criterion="n", field="x", expected_field="value", abs_tol=abs_tol, rel_tol=rel_tol))
        judged = evaluator.evaluate(case, out({"x": got}))
        reference = got == pytest.approx(want, rel=rel_tol or 0.0, abs=abs_tol or 0.0)
        assert judged.status == ("pass" if reference else "fail"), (got, want, abs_tol, rel_tol)
        outcomes.add(judged.status)
    assert outcomes == {"pass", "fail"}


def test_numeric_reasons_and_expected_values():
    evaluator = Numeric(NumericOptions(criterion="n", field="answer", abs_tol=0.5))
    assert evaluator.evaluate(CASE, out({"answer": "It is 42.4."})).status == "pass"
    far = evaluator.evaluate(CASE, out({"answer": "It is 43"}))
    assert (far.reason, far.detail) == ("out_of_tolerance", {"got": 43.0, "expected": 42.0, "error": 1.0})
    assert evaluator.evaluate(CASE, out({"answer": "unknown"})).reason == "no_number"
    assert evaluator.evaluate(CASE, out({"other": 1})).reason == "field_absent"
    assert evaluator.exclude(Case(id="x", input={}, expected={})) == "no_expected_value"
    with pytest.raises(ConfigError, match="cases.jsonl:3: \\$.expected.answer: evaluator 'numeric' expects a number"):
        evaluator.exclude(Case(id="x", input={}, expected={"answer": "42"}, source="cases.jsonl:3"))
    with pytest.raises(ConfigError, match="abs_tol must be a finite number >= 0"):
        NumericOptions(criterion="n", abs_tol=-1.0)


# -- latency and cost --------------------------------------------------------------------------


def test_latency_sums_the_recorded_stages_or_reads_one():
    usage = [{"tokens": {}, "stages": {"retriever": 0.25, "llm": 1.0}}, {"tokens": {}, "stages": {"llm": 0.5}}]
    total = Latency(LatencyOptions(criterion="l", max_seconds=2.0)).evaluate(CASE, out("x", usage))
    assert (total.status, total.detail["seconds"]) == ("pass", 1.75)
    slow = Latency(LatencyOptions(criterion="l", max_seconds=1.0)).evaluate(CASE, out("x", usage))
    assert (slow.status, slow.reason) == ("fail", "too_slow")
    llm = Latency(LatencyOptions(criterion="l", max_seconds=1.0, stage="llm")).evaluate(CASE, out("x", usage))
    assert (llm.status, llm.detail["seconds"]) == ("fail", 1.5)
    retriever = Latency(LatencyOptions(criterion="l", max_seconds=1.0, stage="retriever")).evaluate(CASE, out("x", usage))
    assert retriever.status == "pass"


def test_latency_without_a_record_is_missing_with_its_reason():
    latency = Latency(LatencyOptions(criterion="l", max_seconds=1.0, stage="rerank"))
    assert latency.reads == ("usage/v1",)
    none = latency.evaluate(CASE, out("x"))
    assert (none.status, none.reason) == ("missing", "no_usage_recorded: the system recorded no usage/v1 for this case")
    other = latency.evaluate(CASE, out("x", [{"tokens": {}, "stages": {"llm": 0.1}}]))
    assert (other.status, other.reason) == ("missing", "no_stage_recorded: usage/v1 has no 'rerank' stage (it has llm)")
    with pytest.raises(ConfigError, match="max_seconds must be a finite number > 0"):
        LatencyOptions(criterion="l", max_seconds=0.0)


def cost(usage, **options):
    return Cost(CostOptions(criterion="c", **options)).evaluate(CASE, out("x", usage))


def test_cost_counts_tokens_and_dollars():
    usage = [{"tokens": {"prompt": 600, "completion": 100}, "stages": {}},
             {"tokens": {"prompt": 300, "completion": 50}, "stages": {}}]
    priced = {"price_per_million_prompt_tokens": 2.0, "price_per_million_completion_tokens": 10.0}
    ok = cost(usage, max_tokens=1050, max_cost=0.0035, **priced)  # 900 * 2 / 1e6 + 150 * 10 / 1e6 = 0.0033
    assert (ok.status, ok.detail["tokens"]["total"], ok.detail["cost"]) == ("pass", 1050, 0.0033)
    over = cost(usage, max_tokens=1000, max_cost=0.003, **priced)
    assert (over.status, over.reason, over.detail["over"]) == ("fail", "over_max_tokens", ["max_tokens", "max_cost"])
    assert cost(usage, max_completion_tokens=149).reason == "over_max_completion_tokens"
    assert cost(usage, max_prompt_tokens=900).status == "pass"
    recorded_total = [{"tokens": {"total": 80}, "stages": {}}]  # a total as recorded wins over a sum
    assert cost(recorded_total, max_tokens=79).reason == "over_max_tokens"


def test_cost_without_the_counts_it_needs_is_missing():
    assert cost(None, max_tokens=10).reason == "no_usage_recorded: the system recorded no usage/v1 for this case"
    only_total = [{"tokens": {"total": 10}, "stages": {"llm": 0.1}}]
    missing = cost(only_total, max_prompt_tokens=10)
    assert (missing.status, missing.reason) == ("missing", "no_tokens_recorded: usage/v1 records no prompt token count "
                                                           "for max_prompt_tokens")
    priced = {"price_per_million_prompt_tokens": 1.0, "price_per_million_completion_tokens": 1.0}
    assert cost(only_total, max_cost=1.0, **priced).status == "missing"


@pytest.mark.parametrize(("options", "problem"), [
    ({}, "cost needs a limit"),
    ({"max_cost": 1.0}, "max_cost needs the prices"),
    ({"max_tokens": 5, "price_per_million_prompt_tokens": 1.0}, "give both price_per_million_prompt_tokens"),
    ({"max_tokens": -1}, "max_tokens must be a finite number >= 0"),
])
def test_cost_options_are_checked(options, problem):
    with pytest.raises(ConfigError, match=re.escape(problem)):
        CostOptions(criterion="c", **options)


# -- through the command line ------------------------------------------------------------------

APP = '''
import json
import time

from oloproof import current_case, system


@system(name="checks", version="1", records=("usage/v1",))
def run(input):
    start = time.perf_counter()
    time.sleep(input["sleep"])
    seconds = time.perf_counter() - start
    words = len(input["q"].split())
    current_case().record("usage/v1", {"tokens": {"prompt": words * 100, "completion": words * 10},
                                       "stages": {"llm": seconds}})
    return {"answer": input["answer"], "json": input["json"]}
'''

SUITE = """
system:
  name: checks
  version: "1"
{system}
cases: cases.jsonl
evaluators:
  - {{type: regex, criterion: cites_total, field: answer, pattern: '\\btotal\\b', flags: [IGNORECASE]}}
  - {{type: json_valid, criterion: json_valid, field: json}}
  - {{type: json_schema, criterion: json_shape, field: json, schema_file: schemas/order.json}}
  - {{type: numeric, criterion: total_right, field: answer, rel_tol: 0.01}}
  - {{type: latency, criterion: fast, max_seconds: 0.3, stage: llm}}
  - {{type: cost, criterion: cheap, max_tokens: 400}}
"""

ORDER = {"type": "object", "required": ["total"],
         "properties": {"total": {"type": "number"}, "lines": {"type": "array", "items": {"type": "string"}}}}

ROWS = [  # the verdicts each case should get, in the order of the suite's criteria
    ({"q": "sum my order", "answer": "The total is 41.8", "json": '{"total": 41.8, "lines": ["a"]}', "sleep": 0.0},
     {"answer": 42}, ["pass", "pass", "pass", "pass", "pass", "pass"]),
    ({"q": "sum my much longer order please", "answer": "Total: 50", "json": '{"total": "50", "lines": ["a"]}',
      "sleep": 0.0}, {"answer": 42}, ["pass", "pass", "fail", "fail", "pass", "fail"]),
    ({"q": "sum it", "answer": "I cannot say", "json": '{"total": 1,}', "sleep": 0.5},
     {"answer": 3}, ["fail", "fail", "fail", "fail", "fail", "pass"]),
]
CRITERIA = ["cites_total", "json_valid", "json_shape", "total_right", "fast", "cheap"]
REASONS = {"c1": {"json_shape": "$.total: '50' is not of type 'number'", "cheap": "over_max_tokens",
                  "total_right": "out_of_tolerance"},
           "c2": {"json_valid": "invalid_json", "fast": "too_slow", "cites_total": "pattern_not_matched"}}


def checks_project(project: Project, system: str) -> None:
    project.write("oloproof.yaml", SUITE.format(system=system))
    project.write("schemas/order.json", json.dumps(ORDER))
    project.cases([{"id": f"c{i}", "input": row, "expected": expected} for i, (row, expected, _) in enumerate(ROWS)])


def assert_verdicts(project: Project, code: int = 0) -> None:
    result = project.run("run", "--json", "result.json")
    assert result.code == code, result
    assert "cites_total" in result.out and "cheap" in result.out
    for i, (_, _, verdicts) in enumerate(ROWS):
        shown = project.run("inspect", "latest", "--case", f"c{i}", "--format", "json")
        judgments = json.loads(shown.out)["judgments"]
        assert [judgments[c]["status"] for c in CRITERIA] == verdicts, (i, judgments)
        for criterion, reason in REASONS.get(f"c{i}", {}).items():
            assert judgments[criterion]["reason"] == reason
    metrics = {m["name"]: m for m in json.loads((project.root / "result.json").read_text())["metrics"]}
    assert {name: metrics[name]["successes"] for name in CRITERIA} == {
        "cites_total": 2, "json_valid": 2, "json_shape": 1, "total_right": 1, "fast": 2, "cheap": 2}


@pytest.mark.slow  # three runs and seven inspections of a three-case suite
def test_all_six_through_a_callable_system(project):
    project.write("app.py", APP)
    checks_project(project, "  callable: app:run")
    assert_verdicts(project)
    # the six are in-process: made again on every run, not cached
    assert "Cache: execution 3 hit/0 miss; judgment 0 hit/18 miss" in project.run("run").out
    # cached (cache: true), a second run reuses every judgment; a changed schema file misses only its own
    project.cache_judgments()
    assert "judgment 0 hit/18 miss" in project.run("run").out
    again = project.run("run")
    assert "judgment 18 hit/0 miss" in again.out, again
    project.write("schemas/order.json", json.dumps({**ORDER, "required": ["total", "currency"]}))
    edited = project.run("run")
    assert "judgment 15 hit/3 miss" in edited.out, edited
    shown = json.loads(project.run("inspect", "latest", "--case", "c0", "--format", "json").out)
    assert shown["judgments"]["json_shape"]["reason"] == "$: 'currency' is a required property"


class CheckedService(BaseHTTPRequestHandler):
    """A service that answers, and reports the seconds and tokens it spent under ``usage``."""

    protocol_version = "HTTP/1.1"
    timeout = 10
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        start = time.perf_counter()
        time.sleep(body["sleep"])
        words = len(body["q"].split())
        reply = {"result": {"answer": body["answer"], "json": body["json"]},
                 "usage": {"tokens": {"prompt": words * 100, "completion": words * 10},
                           "stages": {"llm": time.perf_counter() - start}}}
        data = json.dumps(reply).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:
        pass


@pytest.mark.slow  # a real service and four inspections
def test_all_six_through_an_http_service(project):
    served = Served(CheckedService, lock=threading.Lock())
    try:
        checks_project(project, f"""  http:
    url: {served.url}
    output_path: result
    artifacts: {{usage/v1: usage}}""")
        assert_verdicts(project)
    finally:
        served.stop()


def test_an_http_service_that_records_no_usage_cannot_gate_on_latency(project):
    project.write("oloproof.yaml", """
        system:
          name: svc
          version: "1"
          http: {url: "http://127.0.0.1:9/answer", output_path: answer}
        cases: cases.jsonl
        evaluators:
          - {type: latency, criterion: fast, max_seconds: 1}
        """)
    project.cases([{"id": "a", "input": {"q": "x"}}])
    result = project.run("run")
    assert result.code == 2 and project.runs() == []
    assert result.err.strip() == ("error: oloproof.yaml:7:6: $.evaluators[0].type: evaluator 'latency' reads usage/v1, "
                                  "which system 'svc' does not record; fix: declare \"usage/v1\" in the system's records "
                                  "and record it for every case")


@pytest.mark.parametrize(("evaluator", "error"), [
    ("{type: regex, criterion: r, pattern: 'total(s'}",
     "oloproof.yaml:7:33: $.evaluators[0].pattern: invalid regular expression 'total(s': missing ), unterminated "
     "subpattern at position 5; fix: fix the pattern (in YAML, quote it with single quotes so backslashes stay as written)"),
    ("{type: regex, criterion: r, pattern: a, flags: IGNORECASE}",
     "oloproof.yaml:7:45: $.evaluators[0].flags: expected a list, got 'IGNORECASE' (str); fix: write a list: [IGNORECASE]"),
    ("{type: json_schema, criterion: s, schema: {type: objct}}",
     "oloproof.yaml:7:39: $.evaluators[0].schema: invalid JSON Schema ($.type of the schema): 'objct' is not valid under "
     "any of the given schemas; fix: correct the schema against its draft (json-schema.org)"),
    ("{type: json_schema, criterion: s, schema_file: schemas/none.json}",
     "oloproof.yaml:7:39: $.evaluators[0].schema_file: cannot read schema_file 'schemas/none.json': No such file or "
     "directory; fix: give a path relative to the suite's directory"),
    ("{type: numeric, criterion: n, rel_tol: -0.1}",
     "oloproof.yaml:7:35: $.evaluators[0].rel_tol: rel_tol must be a finite number >= 0, got -0.1; fix: write e.g. "
     "`rel_tol: 0.01`"),
    ("{type: cost, criterion: c, max_cost: 0.01}",
     "oloproof.yaml:7:5: $.evaluators[0]: max_cost needs the prices to compute a cost; fix: add "
     "price_per_million_prompt_tokens and price_per_million_completion_tokens"),
])
def test_bad_options_are_one_line_config_errors(project, evaluator, error):
    project.write("app.py", APP)
    project.write("oloproof.yaml", f"""
        system:
          name: checks
          version: "1"
          callable: app:run
        cases: cases.jsonl
        evaluators:
          - {evaluator}
        """)
    project.cases([{"id": "a", "input": {"q": "x", "answer": "1", "json": "{}", "sleep": 0}, "expected": {"answer": 1}}])
    result = project.run("run")
    assert (result.code, result.out, result.err.strip()) == (2, "", f"error: {error}")
    assert project.runs() == []
