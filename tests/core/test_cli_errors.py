"""Bad input: one line saying what, where and how to fix it; exit 2; nothing stored."""

from __future__ import annotations

import json

import pytest

from conftest import case

GOOD = [case(1), case(2)]


def check_error(project, expected: str, *args: str):
    result = project.run("run", *args)
    assert result.code == 2, result
    assert "Traceback" not in result.text
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, result.err
    assert expected in lines[0], lines[0]
    assert project.runs() == []
    return lines[0]


@pytest.mark.parametrize(("text", "expected"), [
    ('{"id": "a", "input": {}}\n{"id": "b", "input": {}\n', "cases.jsonl:2: invalid JSON"),
    ('{"id": "a", "input": {}}\n{"id": "a", "input": {}}\n', "cases.jsonl:2: $.id: duplicate id 'a' (first on line 1)"),
    ('{"input": {}}\n', "cases.jsonl:1: $.id: missing id"),
    ('{"id": 7, "input": {}}\n', "cases.jsonl:1: $.id: expected a non-empty string, got 7 (int)"),
    ('{"id": "a"}\n', "cases.jsonl:1: $.input: missing input"),
    ('{"id": "a", "input": "hello"}\n', "cases.jsonl:1: $.input: expected a JSON object"),
    ('{"id": "a", "input": {}, "expect": {}}\n', "cases.jsonl:1: $.expect: unknown field 'expect'; fix: rename it to 'expected'"),
    ('[1, 2]\n', "cases.jsonl:1: expected a JSON object, got list"),
])
def test_bad_case_files(project, text, expected):
    project.write("cases.jsonl", text)
    check_error(project, expected)


@pytest.mark.parametrize(("yaml_edit", "expected"), [
    (("expected_field: answer}", "expected_feild: answer}"),
     "oloproof.yaml:7:64: $.evaluators[0].expected_feild: unknown key 'expected_feild'; fix: rename it to 'expected_field'"),
    (("type: contains", "type: contians"),
     "oloproof.yaml:7:6: $.evaluators[0].type: unknown evaluator 'contians'; fix: did you mean 'contains'?"),
    (("callable: app:run", "callabel: app:run"),
     "oloproof.yaml:4:3: $.system.callabel: unknown system 'callabel'; fix: did you mean 'callable'?"),
    (("callable: app:run", "callable: nowhere:run"),
     "$.system.callable: cannot import module 'nowhere'"),
    (("callable: app:run", "callable: app:walk"),
     "$.system.callable: module 'app' has no attribute 'walk'"),
    (("cases: cases.jsonl", "cases: missing.jsonl"),
     "no such case file missing.jsonl"),
    (("cases: cases.jsonl", "cases: cases.jsonl\nconcurrency: yes"),
     "$.concurrency: expected an integer, got 'yes' (str)"),
    (("cases: cases.jsonl", "cases: [oops"), "oloproof.yaml:6:11: invalid YAML"),
])
def test_bad_config(project, yaml_edit, expected):
    project.cases(GOOD)
    text = (project.root / "oloproof.yaml").read_text()
    assert yaml_edit[0] in text
    project.write("oloproof.yaml", text.replace(yaml_edit[0], yaml_edit[1]))
    check_error(project, expected)


@pytest.mark.slow
def test_bad_policy(project):
    project.cases(GOOD)
    base = (project.root / "oloproof.yaml").read_text()
    project.write("oloproof.yaml", base + "policy: policy.yaml\n")
    project.write("policy.yaml", """
        version: 1
        rules:
          - {id: floor, metric: answer_corect, min: 0.7}
    """)
    check_error(project, "policy.yaml:3:5: $.rules[0]: rule 'floor' names metric 'answer_corect', which no evaluator defines")
    project.write("policy.yaml", "version: 1\nrules:\n  - {id: floor, metric: answer_correct, min: 70}\n")
    check_error(project, "policy.yaml:3:41: $.rules[0].min: min must be a fraction between 0 and 1, got 70.0")
    project.write("policy.yaml", "version: 1\nblock_on: [FAIL, MAYBE]\nrules: []\n")
    check_error(project, "policy.yaml:2:18: $.block_on[1]: unknown verdict 'MAYBE'")
    project.write("policy.yaml", "version: 1\nconfidence_level: 95\nrules: []\n")
    check_error(project, "confidence_level must be between 0 and 1, got 95.0")


def test_missing_config_file(tmp_path):
    from conftest import olo

    result = olo("run", cwd=tmp_path)
    assert result.code == 2
    assert "no such file oloproof.yaml" in result.err


ARTIFACT_APP = '''
from oloproof import Context, ContextItem, Passage, Retrieval, current_case, system

@system(name="rag", version="1", records=("retrieval/v1", "context/v1"))
def run(input):
    mode = input["mode"]
    rec = current_case()
    if mode == "position":
        rec.context(Context(items=(ContextItem(doc_id="kb-1", position=0),)))
    elif mode == "doc_id":
        rec.retrieval(Retrieval(query="q", depth=2, candidates=[Passage(doc_id="")]))
    elif mode == "type":
        rec.retrieval({"query": "q", "depth": 2, "candidates": "kb-1"})
    elif mode == "undeclared":
        rec.citations(["kb-1"])
    elif mode == "deep":
        rec.retrieval(Retrieval(query="q", depth=1, candidates=[Passage(doc_id="a"), Passage(doc_id="b")]))
    return {"answer": "x"}
'''


@pytest.mark.parametrize(("mode", "expected"), [
    ("position", "case 'bad': ContextItem.position must be a positive integer, got 0"),
    ("doc_id", "case 'bad': Passage.doc_id must be a non-empty string, got ''"),
    ("type", "case 'bad': malformed retrieval/v1: candidates: expected a list, got 'kb-1'"),
    ("undeclared", "case 'bad': the system recorded citations/v1, which it does not declare"),
    ("deep", "case 'bad': malformed retrieval/v1: candidates: 2 passages for depth 1"),
])
def test_malformed_artifacts_stop_the_run(project, mode, expected):
    project.write("app.py", ARTIFACT_APP)
    project.cases([{"id": "fine", "input": {"mode": "none"}, "expected": {"answer": "x"}},
                   {"id": "bad", "input": {"mode": mode}, "expected": {"answer": "x"}}])
    check_error(project, expected)


def test_output_that_is_not_json_is_that_cases_missing_reason(project):
    project.write("app.py", "from oloproof import system\n\n@system(name='s', version='1')\n"
                            "def run(input):\n    return {'answer': object()}\n")
    project.cases(GOOD)
    result = project.run("run")
    assert result.code == 0, result  # no policy; every case missing, none stops the run
    assert "invalid_output: $.output.answer: a value of type object is not JSON (2)" in result.out


@pytest.mark.slow
def test_artifacts_are_recorded_and_exported(project):
    project.write("app.py", '''
from oloproof import Context, ContextItem, DroppedItem, Passage, Retrieval, current_case, system

@system(name="rag", version="1", records=("retrieval/v1", "context/v1", "citations/v1"))
def run(input):
    rec = current_case()
    rec.retrieval(Retrieval(query=input["q"], depth=3, candidates=(Passage(doc_id="kb-1", score=2.0, text="t"),)))
    rec.context(Context(items=(ContextItem(doc_id="kb-1", position=1, tokens=1, text="t"),),
                        dropped=(DroppedItem(doc_id="kb-2", position=2, reason="top_k"),), token_budget=40))
    rec.citations(["kb-1"])
    return {"answer": input["q"]}
''')
    project.cases(GOOD)
    run_id = project.run("run").out.split()[1]
    assert project.run("export", run_id).code == 0
    record = json.loads((project.root / ".oloproof" / "bundles" / run_id / "cases.jsonl").read_text().splitlines()[0])
    assert record["artifacts"] == {
        "retrieval/v1": [{"query": "answer 1", "depth": 3, "candidates": [{"doc_id": "kb-1", "score": 2.0, "text": "t"}]}],
        "context/v1": [{"items": [{"doc_id": "kb-1", "position": 1, "tokens": 1, "text": "t"}],
                        "dropped": [{"doc_id": "kb-2", "position": 2, "reason": "top_k"}],
                        "token_budget": 40, "source": "retrieval"}],
        "citations/v1": [{"ids": ["kb-1"]}],
    }


def test_a_misspelt_system_key_is_named(project):
    project.cases(GOOD)
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text().replace("  name: echo", "  nme: echo"))
    check_error(project, "oloproof.yaml:2:3: $.system.nme: unknown key 'nme'; fix: rename it to 'name'")


def test_a_disabled_plugin_is_named_as_disabled(project):
    project.cases(GOOD)
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "disable_plugins: [contains]\n")
    check_error(project, "evaluator 'contains' comes from plugin 'contains', which is disabled")


def test_a_plugin_with_a_misspelt_hook_is_a_plugin_error():
    import types

    from oloproof import PluginError, hookimpl
    from oloproof_core.hooks.manager import make_plugin_manager

    module = types.ModuleType("oloproof_typo")

    @hookimpl
    def oloproof_register_evaluator(registry):  # the hook is oloproof_register_evaluators
        pass

    module.oloproof_register_evaluator = oloproof_register_evaluator
    with pytest.raises(PluginError, match=r"plugin 'typo' from <local> : .*oloproof_register_evaluator"):
        make_plugin_manager(entry_points=False, plugins=[("typo", module)])


def test_a_judge_s_disabled_provider_is_named_as_disabled(project):
    # a judge finds its provider among the suite's plugins: disable_plugins: in oloproof.yaml holds
    # for providers as for any other plugin
    project.cases(GOOD)
    project.write("replies.jsonl", "")
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text()
                  + "  - {type: rubric_judge, criterion: polite, rubric: Polite., provider: replay, model: m,\n"
                  + "     provider_options: {file: replies.jsonl}}\n")
    judged = (project.root / "oloproof.yaml").read_text()
    project.write("oloproof.yaml", judged + "disable_plugins: [replay]\n")
    check_error(project, "evaluator 'rubric_judge' names provider 'replay' comes from plugin 'replay', which is disabled")
    project.write("oloproof.yaml", judged)
    assert project.run("run").code in (0, 1), "the same suite runs with the provider enabled"
