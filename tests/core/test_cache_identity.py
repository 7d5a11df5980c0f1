"""A cached result is never one the current code or service would not give.

Each scenario runs the real CLI twice on a project, changes what the system is (a helper module
it imports, the class a staged config names, the service behind a URL) and checks that the
second run reports what the changed system produces, with no flag.
"""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler

import pytest

from conftest import Project, Served, case

# cache: true: these tests watch the judgment cache's key, and `contains` is not cached by default
CONTAINS = """
cases: cases.jsonl
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer, cache: true}
"""


def cache_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("Cache:", "Stages:", "Reused:"))]


def estimate(text: str, metric: str) -> str:
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if cells and cells[0] == metric:
            return cells[1]
    raise AssertionError(f"no {metric} row in\n{text}")


def versions(project: Project) -> list[str]:
    out = project.run("runs").out
    return re.findall(r"│ (\S+ \S+\+[0-9a-f]{12}) +│", out)


def edit(project: Project, name: str, old: str, new: str) -> None:
    path = project.root / name
    text = path.read_text(encoding="utf-8")
    assert old in text, (name, old)
    path.write_text(text.replace(old, new), encoding="utf-8")


# -- 1. a helper module the system imports ---------------------------------------------------

def callable_project(root) -> Project:
    project = Project(root)
    project.write("app.py", """
        from oloproof import system

        import generator


        @system(name="qa", version="1")
        def run(input):
            return {"answer": generator.answer(input["q"])}
    """)
    project.write("generator.py", """
        def answer(q):
            return q
    """)
    project.write("oloproof.yaml", "system:\n  callable: app:run\n" + CONTAINS)
    project.cases([case(i) for i in range(4)])
    return project


@pytest.mark.slow
def test_editing_an_imported_module_gives_the_new_code_s_numbers(tmp_path):
    project = callable_project(tmp_path)
    first = project.run("run")
    assert first.code == 0, first
    assert estimate(first.out, "answer_correct") == "100.0%"

    edit(project, "generator.py", "return q", 'return "I do not know"')
    second = project.run("run")
    assert second.code == 0, second
    assert cache_lines(second.out)[0] == "Cache: execution 0 hit/4 miss; judgment 0 hit/4 miss"
    assert estimate(second.out, "answer_correct") == "0.0%"
    # the same as a run that reads no cache at all
    assert estimate(project.run("run", "--no-cache").out, "answer_correct") == "0.0%"
    # two systems with different code show different versions (runs lists the newest first)
    shown = versions(project)
    assert len(shown) == 3 and shown[0] == shown[1] != shown[2], shown


@pytest.mark.slow
def test_an_unchanged_project_is_served_entirely_from_the_cache(tmp_path):
    project = callable_project(tmp_path)
    assert project.run("run").code == 0
    again = project.run("run")
    assert cache_lines(again.out) == ["Cache: execution 4 hit/0 miss; judgment 4 hit/0 miss"]


@pytest.mark.slow
def test_a_module_imported_inside_the_function_is_covered_too(tmp_path):
    project = Project(tmp_path)
    project.write("app.py", """
        from oloproof import system


        @system(name="qa", version="1")
        def run(input):
            import lazyhelper  # imported on the first call, after the fingerprint is taken

            return {"answer": lazyhelper.answer(input["q"])}
    """)
    project.write("lazyhelper.py", "def answer(q):\n    return q\n")
    project.write("oloproof.yaml", "system:\n  callable: app:run\n" + CONTAINS)
    project.cases([case(i) for i in range(3)])
    assert estimate(project.run("run").out, "answer_correct") == "100.0%"
    edit(project, "lazyhelper.py", "return q", 'return "?"')
    second = project.run("run")
    assert cache_lines(second.out)[0] == "Cache: execution 0 hit/3 miss; judgment 0 hit/3 miss"
    assert estimate(second.out, "answer_correct") == "0.0%"


# -- 2. sibling staged classes with an inherited retrieve -------------------------------------

SIBLINGS = '''
from oloproof import Passage, Retrieval, rag_system


class Base:
    def retrieve(self, input, depth):
        ranked = self.order()  # overridden below: the inherited retrieve differs per class
        return Retrieval(query=input["q"], depth=depth,
                         candidates=tuple(Passage(doc_id=d, text=d) for d in ranked[:depth]))

    def generate(self, input, context):
        return {"answer": " ".join(item.doc_id for item in context.items)}


@rag_system(name="mini", version="1", depth=2, index_version="v1")
class First(Base):
    def order(self):
        return ["d1", "d2", "d3"]


@rag_system(name="mini", version="1", depth=2, index_version="v1")
class Second(Base):
    def order(self):
        return ["d3", "d2", "d1"]
'''
HIT_RATE = """
cases: cases.jsonl
evaluators:
  - {type: hit_rate, k: 1, cache: true}
"""


@pytest.mark.slow
def test_sibling_classes_sharing_an_inherited_retrieve_keep_their_own_retrievals(tmp_path):
    project = Project(tmp_path)
    project.write("app.py", SIBLINGS)
    project.write("oloproof.yaml", "system:\n  rag: app:First\n" + HIT_RATE)
    project.write("second.yaml", "system:\n  rag: app:Second\n" + HIT_RATE)
    project.cases([{"id": f"c{i}", "input": {"q": f"q{i}"}, "expected": {"relevant": [{"doc_id": "d1"}]}}
                   for i in range(5)])
    first = project.run("run")
    assert first.code == 0, first
    assert estimate(first.out, "hit_rate_at_1") == "100.0%"

    second = project.run("run", "--config", "second.yaml")
    assert second.code == 0, second
    assert cache_lines(second.out) == ["Cache: execution 0 hit/5 miss; judgment 0 hit/5 miss",
                                       "Stages: retrieve 0 hit/5 miss; generate 0 hit/5 miss"]
    assert estimate(second.out, "hit_rate_at_1") == "0.0%"
    shown = versions(project)
    assert len(shown) == 2 and shown[0] != shown[1], shown


# -- the stage caches follow what each stage reaches --------------------------------------------

STAGED = '''
from oloproof import rag_system

import generator
import retriever


@rag_system(name="mini", version="1", depth=2, index_version="v1")
class Rag:
    def retrieve(self, input, depth):
        return retriever.search(input["q"], depth)

    def generate(self, input, context):
        return generator.answer(input["q"], context)
'''
RETRIEVER = '''
from oloproof import Passage, Retrieval

DOCS = ["d1", "d2", "d3"]


def search(q, depth):
    return Retrieval(query=q, depth=depth, candidates=tuple(Passage(doc_id=d, text=d) for d in DOCS[:depth]))
'''
GENERATOR = '''
def answer(q, context):
    return {"answer": " ".join(item.doc_id for item in context.items)}
'''


def staged_project(root) -> Project:
    project = Project(root)
    project.write("app.py", STAGED)
    project.write("retriever.py", RETRIEVER)
    project.write("generator.py", GENERATOR)
    project.write("oloproof.yaml", "system:\n  rag: app:Rag\n" + HIT_RATE)
    project.cases([{"id": f"c{i}", "input": {"q": f"q{i}"}, "expected": {"relevant": [{"doc_id": "d1"}]}}
                   for i in range(3)])
    return project


@pytest.mark.slow
def test_editing_the_generator_module_keeps_the_retrievals_and_editing_the_retriever_does_not(tmp_path):
    project = staged_project(tmp_path)
    assert project.run("run").code == 0

    edit(project, "generator.py", '" ".join', '",".join')
    after_generator = project.run("run")
    assert cache_lines(after_generator.out) == ["Cache: execution 0 hit/3 miss; judgment 0 hit/3 miss",
                                                "Stages: retrieve 3 hit/0 miss; generate 0 hit/3 miss"]

    edit(project, "retriever.py", 'DOCS = ["d1", "d2", "d3"]', 'DOCS = ["d2", "d1", "d3"]')
    after_retriever = project.run("run")
    assert cache_lines(after_retriever.out)[1] == "Stages: retrieve 0 hit/3 miss; generate 0 hit/3 miss"
    assert estimate(after_retriever.out, "hit_rate_at_1") == "0.0%"


DATACLASS_RETRIEVER = '''
from dataclasses import dataclass

from oloproof import Passage, Retrieval


@dataclass(frozen=True)
class Hit:
    doc_id: str


def search(q, depth):
    hits = [Hit(d) for d in ["d1", "d2", "d3"][:depth]]
    return Retrieval(query=q, depth=depth, candidates=tuple(Passage(doc_id=h.doc_id, text=h.doc_id) for h in hits))
'''


@pytest.mark.slow
def test_a_copied_project_hits_every_cache_its_original_filled(tmp_path):
    """Identities rest on content only: a copy in another folder, every file with a new time
    (a fresh checkout, another CI runner), re-runs from the cache, a dataclass's generated code
    included (it has no source file of its own)."""
    import os
    import shutil

    project = staged_project(tmp_path / "original")
    project.write("retriever.py", DATACLASS_RETRIEVER)
    first = project.run("run")
    assert cache_lines(first.out)[0] == "Cache: execution 0 hit/3 miss; judgment 0 hit/3 miss", first
    copy = Project(tmp_path / "copy")
    shutil.copytree(project.root, copy.root, copy_function=shutil.copy)  # contents only, new times
    for path in copy.root.rglob("*.py"):
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 7_000_000_000))
    again = copy.run("run")
    assert cache_lines(again.out)[0] == "Cache: execution 3 hit/0 miss; judgment 3 hit/0 miss", again
    # the retriever's stage (which reaches the dataclass) is served from its cache in the copy
    edit(copy, "generator.py", '" ".join', '",".join')
    generator_edited = copy.run("run")
    assert cache_lines(generator_edited.out)[1] == "Stages: retrieve 3 hit/0 miss; generate 0 hit/3 miss", (
        generator_edited)
    edit(copy, "retriever.py", "frozen=True", "frozen=False")  # the dataclass's own code changed
    changed = copy.run("run")
    assert cache_lines(changed.out)[1] == "Stages: retrieve 0 hit/3 miss; generate 3 hit/0 miss", changed


# -- 3. an HTTP service restarted with another answer behind the same URL ---------------------

class Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        reply = json.dumps({"answer": self.server.prefix or body["q"]}).encode()
        self.server.calls += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args) -> None:
        pass


def Service(prefix: str, port: int = 0) -> Served:
    """A service on 127.0.0.1 that answers ``prefix`` to every question, or the question itself when
    ``prefix`` is empty; a second one on the same port is another service behind the same URL."""
    return Served(Answer, port=port, prefix=prefix, calls=0)


def http_project(root, port: int, extra: str = "") -> Project:
    project = Project(root)
    system = (f"system:\n  name: svc\n  {extra}\n  http:\n    url: http://127.0.0.1:{port}/answer\n"
              "    output_path: answer\n    retries: 0\n    timeout: 5\n")
    project.write("oloproof.yaml", system + CONTAINS.replace("answer_correct, field: answer, ", "answer_correct, "))
    project.cases([case(i) for i in range(4)])
    return project


@pytest.mark.slow
def test_a_redeployed_service_is_measured_again_with_no_flag(tmp_path):
    service = Service("")
    try:
        project = http_project(tmp_path, service.port)
        first = project.run("run")
        assert estimate(first.out, "answer_correct") == "100.0%", first
        service.stop()
        service = Service("I do not know", service.port)  # the same URL, another service
        second = project.run("run")
        assert second.code == 0, second
        assert cache_lines(second.out)[0] == "Cache: execution 0 hit/4 miss; judgment 0 hit/4 miss"
        assert estimate(second.out, "answer_correct") == "0.0%"
        assert service.server.calls == 4
    finally:
        service.stop()
    # the service is down: the run says so, it does not report the last service's numbers
    down = project.run("run")
    assert "Missing: 4 of 4 cases produced no output" in down.out, down
    assert "Reused:" not in down.out


@pytest.mark.slow
def test_reusing_a_service_s_executions_is_explicit_and_named(tmp_path):
    service = Service("")
    try:
        project = http_project(tmp_path, service.port, extra="cache: reuse")
        first = project.run("run")
        first_id = first.out.split()[1]
        again = project.run("run")
        assert service.server.calls == 4
    finally:
        service.stop()
    assert cache_lines(again.out) == [
        "Cache: execution 4 hit/0 miss; judgment 4 hit/0 miss",
        f"Reused: 4 of 4 executions were recorded by earlier runs and not sent to the system "
        f"(system.cache: reuse): {first_id} (4)"]


@pytest.mark.slow
def test_refresh_re_executes_and_overwrites_but_reuses_judgments(tmp_path):
    project = callable_project(tmp_path)
    assert project.run("run").code == 0
    refreshed = project.run("run", "--refresh")
    assert cache_lines(refreshed.out) == ["Cache: execution 0 hit/4 miss; judgment 4 hit/0 miss"]


def judgment_rows(project: Project) -> list[dict]:
    import sqlite3

    with sqlite3.connect(project.root / ".oloproof" / "store.db") as db:
        return [json.loads(v) for v, in db.execute("SELECT value FROM cache WHERE ns = 'judgment'")]


@pytest.mark.slow
def test_the_judgment_cache_holds_one_row_a_case_and_an_evaluator_whose_identity_changed_misses_alone(tmp_path):
    project = Project(tmp_path)
    project.write("app.py", """
        from oloproof import system

        @system(name="echo", version="1")
        def run(input):
            return {"answer": input["q"]}
    """)
    project.cases([case(i, ok=i != 2) for i in range(4)])
    suite = """
        system: {name: echo, version: "1", callable: app:run}
        cases: cases.jsonl
        evaluators:
          - {type: contains, criterion: answer_correct, field: answer, expected_field: answer, cache: true}
          - {type: contains, criterion: strict, field: answer, expected_field: answer, case_sensitive: CASE, cache: true}
    """
    project.write("oloproof.yaml", suite.replace("CASE", "true"))
    first = project.run("run")
    assert cache_lines(first.out)[0] == "Cache: execution 0 hit/4 miss; judgment 0 hit/8 miss", first
    rows = judgment_rows(project)
    assert len(rows) == 4 and all(len(row) == 2 for row in rows)  # one row a case, both judgments in it
    # one evaluator's identity changes: it alone misses, and the row keeps the old judgment beside the new
    project.write("oloproof.yaml", suite.replace("CASE", "false"))
    changed = project.run("run")
    assert cache_lines(changed.out)[0] == "Cache: execution 4 hit/0 miss; judgment 4 hit/4 miss", changed
    rows = judgment_rows(project)
    assert len(rows) == 4 and all(len(row) == 3 for row in rows)
    # going back hits every judgment; --no-cache re-judges them all and keeps the rows whole
    project.write("oloproof.yaml", suite.replace("CASE", "true"))
    assert cache_lines(project.run("run").out)[0] == "Cache: execution 4 hit/0 miss; judgment 8 hit/0 miss"
    assert "judgment 0 hit/8 miss" in project.run("run", "--no-cache").out
    assert [len(row) for row in judgment_rows(project)] == [3] * 4
    # an output that changes misses every judgment of its case
    project.cases([case(i, ok=i not in (1, 2)) for i in range(4)])
    assert "judgment 6 hit/2 miss" in project.run("run").out


@pytest.mark.slow
def test_the_cache_command_lists_and_clears_namespaces(tmp_path):
    project = callable_project(tmp_path)
    assert project.run("run").code == 0
    listed = project.run("cache")
    assert listed.code == 0, listed
    assert re.search(r"│ execution +│ 4 +│ [\d.,]+ (B|KB) +│", listed.out), listed.out
    cleared = project.run("cache", "clear", "execution")
    assert cleared.out.strip() == "Cleared execution: 4 entries"
    assert "Cache: execution 0 hit/4 miss; judgment 4 hit/0 miss" in project.run("run").out
    wrong = project.run("cache", "clear", "executions")
    assert wrong.code == 2 and "no cache namespace 'executions'" in wrong.err, wrong
    assert len(project.runs()) == 2  # clearing a cache never deletes a run


@pytest.mark.slow
def test_diagnose_names_what_changed_and_uses_the_config_the_run_was_made_with(tmp_path):
    project = staged_project(tmp_path)
    (project.root / "oloproof.yaml").rename(project.root / "main.yaml")
    run = project.run("run", "--config", "main.yaml")
    run_id = run.out.split()[1]
    # no --config: the run's own config (main.yaml) is used, not a missing oloproof.yaml
    diag = project.run("diagnose", run_id, "--intervention", "gold-context", "--criterion", "hit_rate_at_1")
    assert diag.code == 0, diag
    edit(project, "generator.py", '" ".join', '",".join')
    changed = project.run("diagnose", run_id, "--intervention", "gold-context", "--criterion", "hit_rate_at_1")
    assert changed.code == 2, changed
    assert "generator.py changed" in changed.err and "oloproof run --config main.yaml" in changed.err, changed.err


# -- an evaluator's helper module -------------------------------------------------------------

EVALUATOR = '''
from oloproof import Judgment

from wordy.helpers import words


class Wordy:
    criterion, metric = "wordy", "proportion"

    def evaluate(self, case, execution):
        return Judgment.of(len(words(str(execution.output))) > 2)
'''


def evaluator_code(root) -> list:
    import subprocess
    import sys

    script = ("import json, sys; sys.path.insert(0, sys.argv[1]); from wordy import Wordy; "
              "from oloproof_core.engine.suite import evaluator_code; print(json.dumps(evaluator_code(Wordy)))")
    out = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.slow
def test_an_evaluator_s_identity_covers_the_helper_modules_of_its_package(tmp_path):
    package = tmp_path / "wordy"
    package.mkdir()
    (package / "__init__.py").write_text(EVALUATOR, encoding="utf-8")
    (package / "helpers.py").write_text("def words(text):\n    return text.split()\n", encoding="utf-8")
    (package / "unrelated.py").write_text("X = 1\n", encoding="utf-8")
    first = evaluator_code(tmp_path)
    (package / "unrelated.py").write_text("X = 2\n", encoding="utf-8")
    assert evaluator_code(tmp_path) == first  # a module the evaluator does not reach
    (package / "helpers.py").write_text("def words(text):\n    return text.split(' ')\n", encoding="utf-8")
    changed = evaluator_code(tmp_path)
    assert changed[0] == first[0] and changed[1] != first[1]


def test_a_suite_runs_from_python_with_the_cli_s_records(tmp_path, monkeypatch):
    import sys

    import oloproof

    project = Project(tmp_path)
    project.write("api_demo_app.py", "from oloproof import system\n\n\n@system(name='qa', version='1')\n"
                                     "def run(input):\n    return {'answer': input['q']}\n")
    project.write("oloproof.yaml", "system:\n  callable: api_demo_app:run\n" + CONTAINS)
    project.cases([case(i) for i in range(4)])
    monkeypatch.setattr(sys, "path", list(sys.path))  # the project's directory is not left importable
    monkeypatch.delitem(sys.modules, "api_demo_app", raising=False)
    outcome = oloproof.run(tmp_path / "oloproof.yaml")
    assert outcome.state == "UNGATED/COMPLETE" and int(outcome.exit_code) == 0
    summary = outcome.summaries["answer_correct"]
    assert (summary.value, summary.observed, summary.cells[0]) == (1.0, 4, "100.0%")
    assert outcome.caches["execution"] == [0, 4]
    assert project.runs() == [outcome.run_id]  # stored like any run
    shown = project.run("inspect", outcome.run_id)
    assert shown.code == 0 and "answer_correct: 100.0%" in shown.out, shown


@pytest.mark.slow
def test_blank_templates_run_as_they_are(tmp_path):
    from conftest import olo

    for template in ("callable", "rag"):
        made = olo("init", "--template", template, template, cwd=tmp_path)
        assert made.code == 0 and f"blank {template} template" in made.out, made
        ran = olo("run", cwd=tmp_path / template)
        assert ran.code == 3 and "Gate: BLOCK (exit 3)" in ran.out, ran  # placeholders fail the floor
    assert (tmp_path / "callable" / "cases.jsonl").is_file()
    both = olo("init", "--template", "http", "--example", "basic", "x", cwd=tmp_path)
    assert both.code == 2 and "either --example NAME or --template" in both.err


@pytest.mark.slow
def test_a_measured_latency_voids_only_the_judgments_that_read_it(tmp_path):
    # a traced service records usage/v1 with the seconds each stage took: they differ on every
    # execution, and every evaluator here says what it reads, so only the one reading usage/v1 misses
    project = Project(tmp_path)
    project.write("app.py", """
        import time

        from oloproof import current_case, system

        @system(name="timed", version="1", records=("usage/v1",))
        def run(input):
            current_case().record("usage/v1", {"tokens": {}, "stages": {"llm": time.perf_counter() % 1}})
            return {"answer": input["q"]}
    """)
    project.cases([case(i) for i in range(4)])
    suite = """
        system: {name: timed, version: "1", callable: app:run}
        cases: cases.jsonl
        evaluators:
          - {type: contains, criterion: answer_correct, field: answer, expected_field: answer, cache: true}
    """
    project.write("oloproof.yaml", suite)
    assert project.run("run").code == 0
    again = project.run("run", "--refresh")  # executed afresh: other seconds, the same answers
    assert cache_lines(again.out)[0] == "Cache: execution 0 hit/4 miss; judgment 4 hit/0 miss", again
    latency = "{type: latency, criterion: fast, max_seconds: 5, cache: true}"
    project.write("oloproof.yaml", suite.rstrip() + f"\n          - {latency}\n")
    assert "judgment 0 hit/8 miss" in project.run("run", "--refresh").out  # a key of its own: both judged
    timed = project.run("run", "--refresh")
    assert cache_lines(timed.out)[0] == "Cache: execution 0 hit/4 miss; judgment 0 hit/8 miss", timed
    # an evaluator that does not say what it reads (regex) may read anything: every artifact is in the key
    regex = "{type: regex, criterion: worded, field: answer, pattern: question}"
    project.write("oloproof.yaml", suite.rstrip() + f"\n          - {regex}\n")
    assert "judgment 0 hit/8 miss" in project.run("run", "--refresh").out
    assert "judgment 0 hit/8 miss" in project.run("run", "--refresh").out


def test_evaluators_see_only_the_artifact_types_the_judgment_key_keeps(tmp_path):
    # every evaluator says what it reads: the key leaves the other types out, and so does what the
    # evaluators are shown, so an evaluator reading a type it did not declare finds it absent
    # rather than a judgment cached under a key that never held it
    from types import SimpleNamespace

    from oloproof_core.engine.judging import judge
    from oloproof_core.model.records import Case, Execution, Judgment
    from oloproof_local import LocalStore, Options

    seen = []

    class Undeclared:
        criterion, reads = "undeclared", ("retrieval/v1",)

        def evaluate(self, case, execution):
            seen.append(sorted(execution.artifacts))
            return Judgment.of("usage/v1" in execution.artifacts)

    def spec(evaluator):
        return SimpleNamespace(evaluator=evaluator, identity={"type": evaluator.criterion})

    usage = {"usage/v1": ({"tokens": {}, "stages": {"llm": 0.25}},)}
    execution = Execution(output={"answer": "a"}, artifacts={"retrieval/v1": ({"candidates": []},), **usage})
    pairs = [(Case(id="c1", input={"q": 1}), execution)]
    store = LocalStore(Options(), tmp_path)
    judgments, _ = judge(pairs, [spec(Undeclared())], store, concurrency=1)
    assert seen == [["retrieval/v1"]] and judgments[0]["undeclared"].status == "fail"

    class Declared(Undeclared):
        criterion, reads = "declared", ("usage/v1",)

    judgments, _ = judge(pairs, [spec(Undeclared()), spec(Declared())], store, concurrency=1)
    assert seen[1:] == [["retrieval/v1", "usage/v1"]] * 2  # another evaluator declares it: in the key, shown
    assert judgments[0]["undeclared"].status == "pass"
    store.close()


def test_an_evaluator_that_is_not_cached_is_judged_on_every_run_and_writes_no_row(tmp_path):
    # `cached = False` (an evaluator's own say) or `cache: false` (the suite's): its judgments are
    # made on every run, counted as misses, and never read from or written to the judgment cache;
    # the other evaluators of the same pairs keep their rows
    from types import SimpleNamespace

    from oloproof_core.engine.judging import judge
    from oloproof_core.model.records import Case, Execution, Judgment
    from oloproof_local import LocalStore, Options

    made = []

    class Counted:
        criterion = "counted"

        def evaluate(self, case, execution):
            made.append((self.criterion, case.id))
            return Judgment.of(True)

    class Uncached(Counted):
        criterion, cached = "uncached", False

    class Refused(Counted):
        criterion = "refused"

    def spec(evaluator, **kw):
        return SimpleNamespace(evaluator=evaluator, identity={"type": evaluator.criterion}, **kw)

    pairs = [(Case(id=f"c{i}", input={"q": i}), Execution(output={"answer": "a"})) for i in range(3)]
    store = LocalStore(Options(), tmp_path)
    specs = [spec(Counted()), spec(Uncached()), spec(Refused(), cached=False)]
    for run in range(2):
        judgments, figures = judge(pairs, specs, store, concurrency=1)
        assert all(j[c].status == "pass" for j in judgments for c in ("counted", "uncached", "refused"))
        assert figures["judgment"] == ([0, 9] if run == 0 else [3, 6]), figures
    assert sorted(made) == sorted([("counted", f"c{i}") for i in range(3)]
                                  + [(c, f"c{i}") for c in ("uncached", "refused") for i in range(3)] * 2)
    rows = store.cache_get_many("judgment", [k for (k,) in store.db.execute(
        "SELECT lower(hex(key)) FROM cache WHERE ns = 'judgment'")])
    assert len(rows) == 3 and all(len(row) == 1 for row in rows.values()), rows  # Counted's alone
    store.close()


def test_the_suite_s_cache_key_says_whether_an_evaluator_s_judgments_are_cached(project):
    project.cases([case(0), case(1, ok=False)])
    suite = (project.root / "oloproof.yaml").read_text(encoding="utf-8")
    project.write("oloproof.yaml", suite.replace("expected_field: answer}", "expected_field: answer, cache: false}"))
    assert cache_lines(project.run("run").out)[0] == "Cache: execution 0 hit/2 miss; judgment 0 hit/2 miss"
    again = project.run("run")
    assert cache_lines(again.out)[0] == "Cache: execution 2 hit/0 miss; judgment 0 hit/2 miss", again
    assert "50.0%" in again.out
    assert re.search(r"│ judgment +│ 0 +│", project.run("cache").out)  # no row written
    project.write("oloproof.yaml", suite.replace("expected_field: answer}", "expected_field: answer, cache: true}"))
    assert cache_lines(project.run("run").out)[0] == "Cache: execution 2 hit/0 miss; judgment 0 hit/2 miss"
    assert cache_lines(project.run("run").out)[0] == "Cache: execution 2 hit/0 miss; judgment 2 hit/0 miss"
    project.write("oloproof.yaml", suite.replace("expected_field: answer}", 'expected_field: answer, cache: "no"}'))
    bad = project.run("run")
    assert bad.code == 2 and bad.err.count("\n") == 1, bad
    assert "oloproof.yaml:" in bad.err and "$.evaluators[0].cache: expected true or false, got 'no' (str)" in bad.err, bad
