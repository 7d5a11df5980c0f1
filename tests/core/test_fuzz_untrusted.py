"""A seeded fuzz of untrusted text and values: random Unicode (lone surrogates, controls, astral
characters, bidirectional controls), random JSON numbers (NaN, 1e400, huge integers) and random
nesting, through a callable system, an HTTP service on 127.0.0.1 and the replay judge, into both
stores. Whatever was fed: the run is stored, every ordinary case is intact, and every output
format (the JSON document, JUnit XML, the Markdown summary, the HTML export) parses.

SEED and COUNT are fixed, so a failure reproduces; raise COUNT locally to search further."""

from __future__ import annotations

import html.parser
import json
import random
import xml.etree.ElementTree as ET

import pytest
from conftest import Project
from hostile import STORES, http_config, olo_env, on_store, records, replay_judge, run_id, serve

SEED = 20261203
COUNT = 40  # hostile cases per system; plus as many ordinary ones

ALPHABET = ([chr(c) for c in range(0x20)] + ["\x7f", "\x85", "\x9b", "\u202e", "\u2066", "\u200f", "\ufeff",
            "\ud800", "\udbff", "\udc00", "\udfff", "\U0001f600", "\U00010348", "\u05d0", "\u0627", "é", "<", ">",
            "&", '"', "\\", "|", "`", "*", "]]>", "a", "Z", " "])


def text(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 24)))


def number(rng: random.Random):
    return rng.choice([float("nan"), float("inf"), -float("inf"), 1e308, -0.0, 5e-324, 10 ** rng.randint(1, 6000),
                       -(2 ** 63), rng.random(), rng.randint(-10, 10)])


def value(rng: random.Random, depth: int = 0):
    kind = rng.random()
    if kind < 0.05:
        nest = rng.choice([3, 150, 250, 3000])
        inner: object = text(rng)
        for _ in range(nest):
            inner = [inner] if rng.random() < 0.5 else {text(rng)[:4] or "k": inner}
        return inner
    if kind < 0.3 or depth > 3:
        return text(rng)
    if kind < 0.5:
        return number(rng)
    if kind < 0.55:
        return rng.choice([{1, 2}, b"\xff", (1, 2), None, True])
    if kind < 0.8:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {text(rng)[:6]: value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def body(rng: random.Random) -> bytes:
    """A service's answer: mostly JSON with hostile strings and numbers, sometimes not JSON at all."""
    def enc(v) -> str:
        if isinstance(v, str):  # escapes as a JSON writer would, lone surrogates included
            return json.dumps(v, ensure_ascii=True)
        if isinstance(v, float):
            return "NaN" if v != v else "1e400" if v == float("inf") else "-1e400" if v == -float("inf") else repr(v)
        if isinstance(v, bool) or v is None:
            return json.dumps(v)
        if isinstance(v, int):
            return str(v) if abs(v) < 10 ** 4000 else "1" * rng.randint(4301, 5000)
        if isinstance(v, dict):
            return "{" + ",".join(f"{enc(str(k))}:{enc(x)}" for k, x in v.items()) + "}"
        if isinstance(v, (list, tuple)):
            return "[" + ",".join(enc(x) for x in v) + "]"
        return json.dumps(str(v))
    shape = rng.random()
    if shape < 0.1:
        return rng.choice([b"", b"<html>", b'{"answer": "tru', b'{"answer": 1, "answer": 2}', b"\xff\xfe",
                           b'{"answer": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"])
    return ('{"answer": ' + enc(value(rng)) + ', "n": ' + enc(number(rng)) + "}").encode("utf-8", "surrogatepass")


APP = '''
import json
from oloproof import system

HOSTILE = {}
with open("hostile.json", encoding="utf-8") as handle:
    for key, encoded in json.load(handle).items():
        HOSTILE[key] = encoded

def decode(text):
    return eval(text)  # the test's own repr() of each value: sets, bytes, NaN and surrogates survive

@system(name="fuzzed", version="1")
def run(input):
    k = input["k"]
    if k.startswith("ok"):
        return {"answer": "ok"}
    if k.startswith("raise"):
        raise ValueError(decode(HOSTILE[k]))
    return decode(HOSTILE[k])
'''


def hostile_cases(rng: random.Random) -> tuple[dict, list[dict]]:
    values, cases = {}, []
    for i in range(COUNT):
        cases.append({"id": f"ok{i:03d}", "input": {"k": f"ok{i:03d}"}, "expected": {"answer": "ok"}})
        key = f"raise{i:03d}" if i % 7 == 0 else f"hostile{i:03d}"
        values[key] = repr(text(rng) if key.startswith("raise") else {"answer": value(rng), "n": number(rng)})
        cases.append({"id": key, "input": {"k": key}, "expected": {"answer": "ok"}})
    return values, cases


class _Html(html.parser.HTMLParser):
    pass


def every_format_parses(project: Project, run: str) -> None:
    written = olo_env(project, "inspect", run, "--format", "json")
    assert written.code == 0, written
    json.loads(written.out)
    junit = olo_env(project, "export", run, "--html", "report.html")
    assert junit.code == 0, junit
    _Html().feed((project.root / "report.html").read_text(encoding="utf-8"))
    ET.parse(project.root / "junit.xml")
    json.loads((project.root / "results.json").read_text(encoding="utf-8"))
    markdown = (project.root / "summary.md").read_text(encoding="utf-8")
    assert "<" not in markdown.replace("&lt;", "") and "\x1b" not in markdown
    bundle = (project.root / ".oloproof" / "bundles" / run / "cases.jsonl").read_text(encoding="utf-8")
    for line in bundle.split("\n")[:-1]:  # JSONL: a line ends at \n alone (U+0085 and U+2028 are text)
        json.loads(line)


def check_run(project: Project, result, rng_cases: list[dict]) -> None:
    assert result.code == 0 and "Traceback" not in result.text, result
    run = run_id(result)
    got = records(project, run)
    assert set(got) == {c["id"] for c in rng_cases}
    for case_id, record in got.items():
        if case_id.startswith("ok"):  # the ordinary cases, intact
            assert record["output"] == {"answer": "ok"} and "missing" not in record, record
            assert record["judgments"]["answer_correct"]["status"] == "pass", record
            assert record["judgments"]["helpful"]["status"] == "pass", record
        else:
            assert "missing" in record or "output" in record
    fed = [r for k, r in got.items() if not k.startswith("ok")]
    assert any(r.get("escaped") for r in fed), "the seed fed no lone surrogate that reached a record"
    assert any(r.get("missing", "").startswith(("invalid_output", "invalid_json")) for r in fed)
    every_format_parses(project, run)
    again = olo_env(project, "run")  # what was cached reads back
    assert again.code == 0, again
    assert olo_env(project, "store", "check").code == 0


REPORTS = ("--junit", "junit.xml", "--junit-cases", "--json", "results.json", "--markdown", "summary.md")


def prepare(project: Project, config: str, cases: list[dict]) -> None:
    project.write("oloproof.yaml", config + replay_judge())
    project.write("replies.jsonl", json.dumps({"match": "RUBRIC-MARK", "verdict": "pass",
                                               "rationale": "cut \ud83d \x1b[2J <b>"}) + "\n")
    project.cases(cases)


@pytest.mark.slow
@pytest.mark.parametrize("kind", STORES)
def test_fuzzed_callable_outputs(tmp_path, request, kind):
    rng = random.Random(SEED)
    values, cases = hostile_cases(rng)
    project = Project(tmp_path)
    project.write("app.py", APP)
    project.write("hostile.json", json.dumps(values))
    prepare(project, """
system:
  name: fuzzed
  version: "1"
  callable: app:run
cases: cases.jsonl
concurrency: 4
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
""", cases)
    on_store(request, project, kind)
    check_run(project, olo_env(project, "run", *REPORTS), cases)


@pytest.mark.slow
@pytest.mark.parametrize("kind", STORES)
def test_fuzzed_service_bodies(tmp_path, request, kind):
    rng = random.Random(SEED + 1)
    bodies = {f"hostile{i:03d}": body(rng) for i in range(COUNT)}
    cases = [{"id": k, "input": {"k": k}, "expected": {"answer": "ok"}} for k in bodies]
    cases += [{"id": f"ok{i:03d}", "input": {"k": f"ok{i:03d}"}, "expected": {"answer": "ok"}} for i in range(COUNT)]
    served = serve(bodies)
    try:
        project = Project(tmp_path)
        prepare(project, http_config(served.url), cases)
        on_store(request, project, kind)
        check_run(project, olo_env(project, "run", *REPORTS), cases)
    finally:
        served.stop()
