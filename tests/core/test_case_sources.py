"""Cases from JSONL, CSV, a JSON array, YAML and a Hugging Face dataset, through the CLI: the same
cases from every format, a BOM accepted, every problem located; and the selection of a subset
(--limit, --filter, --sample --seed), recorded and said."""

from __future__ import annotations

import json

import pytest

from conftest import case

CASES = [case(i, ok=i % 3 != 0) for i in range(12)]


def judged(project, *args: str) -> dict:
    """case id -> verdict of the latest run, read from its exported bundle."""
    result = project.run("run", *args)
    assert result.code == 0, result
    run_id = result.out.split()[1]
    assert project.run("export", run_id).code == 0
    lines = (project.root / ".oloproof" / "bundles" / run_id / "cases.jsonl").read_text(encoding="utf-8")
    return {r["id"]: r["judgments"]["answer_correct"]["status"] for r in map(json.loads, lines.splitlines())}


def use(project, cases: str) -> None:
    text = (project.root / "oloproof.yaml").read_text(encoding="utf-8")
    project.write("oloproof.yaml", text.replace("cases: cases.jsonl", f"cases: {cases}"))


def csv_text(rows: list[dict]) -> str:
    lines = ["id,input.q,expected.answer,metadata.topic"]
    lines += [f'{r["id"]},"{r["input"]["q"]}",{r["expected"]["answer"]},{r["metadata"]["topic"]}' for r in rows]
    return "\n".join(lines) + "\n"


def yaml_text(rows: list[dict]) -> str:
    return "".join(f'- id: {r["id"]}\n  input: {{q: "{r["input"]["q"]}"}}\n  expected: {{answer: "{r["expected"]["answer"]}"}}\n'
                   f'  metadata: {{topic: {r["metadata"]["topic"]}}}\n' for r in rows)


def test_every_format_reads_the_same_cases_and_a_bom_is_accepted(project):
    project.cases(CASES)
    want = judged(project)
    assert len(want) == 12 and list(want.values()).count("fail") == 4
    (project.root / "cases.jsonl").write_bytes(b"\xef\xbb\xbf" + (project.root / "cases.jsonl").read_bytes())
    assert judged(project) == want  # a Windows editor's BOM
    for name, text in (("cases.csv", csv_text(CASES)), ("cases.json", json.dumps(CASES, indent=2)),
                       ("cases.yaml", yaml_text(CASES))):
        (project.root / name).write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
        use(project, name)
        assert judged(project) == want, name
        project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text().replace(f"cases: {name}",
                                                                                           "cases: cases.jsonl"))
    # the format forced, whatever the extension
    project.write("cases.txt", csv_text(CASES))
    use(project, "{path: cases.txt, format: csv}")
    assert judged(project) == want


def test_csv_columns_json_and_list_cells(project):
    project.write("app.py", '''
        from oloproof import system

        @system(name="echo", version="1")
        def run(input):
            return {"answer": f"{input['q']} ({input['n']})"}
        ''')
    project.write("cases.csv", 'id,input.q,input.n:json,expected.answers:list,metadata.topic\n'
                               'a,Paris,3,Paris | paris,geo\n'
                               'b,"Rome, Italy",4,Milan,\n')
    project.write("oloproof.yaml", """
        system: {callable: app:run}
        cases: cases.csv
        evaluators:
          - {type: contains, criterion: answer_correct, field: answer, expected_field: answers}
        slices: [metadata.topic]
        """)
    assert judged(project) == {"a": "pass", "b": "fail"}
    out = project.run("inspect", "latest", "--case", "b", "--format", "json").out
    record = json.loads(out)["case"]
    assert record["input"] == {"q": "Rome, Italy", "n": 4} and record["expected"] == {"answers": ["Milan"]}
    assert record["metadata"] == {}  # an empty cell leaves the field out


@pytest.mark.parametrize(("name", "text", "error"), [
    ("cases.csv", "id,input.q,topic\na,x,y\n",
     "cases.csv:1: column 'topic' is not a case field; fix: rename it (e.g. input.topic or metadata.topic)"),
    ("cases.csv", "id,input.q,expectd.answer\na,x,y\n",  # the field's typo fixed, the key kept
     "cases.csv:1: column 'expectd.answer' is not a case field; fix: rename it (e.g. expected.answer);"),
    ("cases.csv", "id,inptu.q\na,x\n", "cases.csv:1: column 'inptu.q' is not a case field; fix: rename it (e.g. input.q);"),
    ("cases.csv", "id,input.q\na,x\nb,y,z\n", "cases.csv:3: 3 cells, the header has 2 columns"),
    ("cases.csv", "id,input.q\na,x\n\"a\",y\n", "cases.csv:3: $.id: duplicate id 'a' (first on line 2)"),
    ("cases.csv", "id,input.q,input.n:json\na,x,[1\n",
     "cases.csv:2: column input.n:json: invalid JSON: Expecting ',' delimiter (column 3); fix: write the cell as JSON"),
    ("cases.csv", "id,expected.answer\na,x\n", "cases.csv:1: no input column"),
    ("cases.json", '[{"id": "a", "input": {}}, {"id": "a", "input": {}}]',
     "cases.json: $[1].id: duplicate id 'a' (first at $[0])"),
    ("cases.json", '[{"id": "a", "input": {}},\n {"id": "b", "input": 3}]',
     "cases.json: $[1].input: expected a JSON object, got 3 (int)"),
    ("cases.json", '[{"id": "a", "input": {}},\n {"id": "b" "input": {}}]',
     "cases.json:2:13: invalid JSON: Expecting ',' delimiter"),
    ("cases.json", '{"id": "a"}', "cases.json: expected a JSON array of cases, got dict"),
    ("cases.yaml", "- id: a\n  input: {q: x}\n- id: b\n  inptu: {q: y}\n",
     "cases.yaml:3: $.inptu: unknown field 'inptu'; fix: rename it to 'input'"),
    ("cases.yaml", "- id: a\n  input: {q: x}\n  metadata: {day: 2024-01-01}\n",
     "cases.yaml:1: $.metadata.day: a YAML date is not a JSON value; fix: quote it"),
    ("cases.yaml", "- id: a\n  input: {q: x\n", "cases.yaml:3:1: invalid YAML"),
    ("cases.txt", "id,input.q\na,x\n", "cannot tell the format of cases.txt from its extension"),
])
def test_located_errors_in_every_format(project, name, text, error):
    project.write(name, text)
    use(project, name)
    result = project.run("run")
    assert result.code == 2, result
    assert error in result.err, result.err
    assert project.runs() == []


@pytest.mark.slow
def test_a_hugging_face_dataset_saved_to_disk(project):
    datasets = pytest.importorskip("datasets")
    rows = [{"id": r["id"], "input.q": r["input"]["q"], "expected.answer": r["expected"]["answer"],
             "metadata.topic": r["metadata"]["topic"]} for r in CASES]
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}).save_to_disk(str(project.root / "hfdata"))
    project.cases(CASES)
    want = judged(project)
    use(project, "{hf: hfdata, split: test}")
    assert judged(project) == want
    use_split = (project.root / "oloproof.yaml").read_text().replace("split: test", "split: train")
    project.write("oloproof.yaml", use_split)
    result = project.run("run")
    assert result.code == 2 and "oloproof.yaml:" in result.err and "no split 'train'" in result.err, result
    assert "examples/s" not in result.err  # no progress bar of the datasets package
    # nested columns (id, input, expected, metadata), from a folder of data files
    project.write("files/test.jsonl", "".join(json.dumps(r) + "\n" for r in CASES))
    project.write("oloproof.yaml", use_split.replace("{hf: hfdata, split: train}", "{hf: files, split: test}"))
    assert judged(project) == want


@pytest.mark.slow
def test_a_subset_is_selected_recorded_and_said(project):
    project.write("policy.yaml", """
        version: 1
        confidence_level: 0.95
        rules:
          - {id: floor, metric: answer_correct, min: 0.1}
        """)
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "policy: policy.yaml\n")
    project.cases([case(i) for i in range(40)])
    assert len(judged(project, "--limit", "10")) == 10
    out = project.run("run", "--limit", "10", "--markdown", "summary.md").out
    assert "Subset: 10 of 40 cases (--limit 10); the gate judged a subset" in out
    assert "10 of 40 cases (a subset: --limit 10)" in (project.root / "summary.md").read_text(encoding="utf-8")
    odd = judged(project, "--filter", "metadata.topic=odd", "--filter", "id=c0[0-1]*")
    assert sorted(odd) == ["c001", "c003", "c005", "c007", "c009", "c011", "c013", "c015", "c017", "c019"]
    assert sorted(judged(project, "--filter", "metadata.topic!=odd", "--limit", "2")) == ["c000", "c002"]
    first = judged(project, "--sample", "7", "--seed", "5")
    assert len(first) == 7 and judged(project, "--sample", "7", "--seed", "5") == first
    assert judged(project, "--sample", "7", "--seed", "6") != first
    listed = project.run("runs").out
    assert "7 of 40" in listed and "10 of 40" in listed
    ref = json.loads(project.run("runs", "--format", "json").out)[-1]
    assert ref["selection"] == {"flags": "--sample 7 --seed 6", "filters": [], "sample": 7, "seed": 6, "limit": None,
                                "selected": 7, "of": 40}
    assert "Subset: 7 of 40 cases (--sample 7 --seed 6)" in project.run("inspect", "latest").out
    assert project.run("export", "latest", "--html", "report.html").code == 0
    assert "7 of 40 cases (a subset: --sample 7 --seed 6)" in (project.root / "report.html").read_text(encoding="utf-8")
    # compare of a subset with a full run: the unpaired cases and the subset are both said
    full = project.run("run").out.split()[1]
    sub = project.run("run", "--limit", "10").out.split()[1]
    project.write("compare.yaml", "version: 1\nconfidence_level: 0.95\nrules: []\n")
    out = project.run("compare", sub, full, "--policy", "compare.yaml").out
    assert f"Unpaired: 0 only in {sub}, 30 only in {full}" in out
    assert f"Subset: {sub} ran 10 of 40 cases (--limit 10)" in out


@pytest.mark.parametrize(("args", "error"), [
    (["--sample", "41"], "error: --sample: 41 is more than the 40 cases; fix: pass --sample 40 or fewer"),
    (["--filter", "metadata.topic=od", "--sample", "3"],
     "error: --filter: metadata.topic=od matches none of the 40 cases; fix: check the field and the pattern "
     "(metadata.topic takes 2 values: even, odd)"),
    (["--filter", "topic=odd"], "error: --filter: cannot read 'topic=odd'; fix: write FIELD=GLOB"),
    (["--filter", "metadata.topic=odd", "--sample", "30"], "30 is more than the 20 cases that pass --filter"),
    (["--limit", "0"], "error: --limit: must be at least 1, got 0"),
])
def test_a_bad_selection_is_a_usage_error(project, args, error):
    project.cases([case(i) for i in range(40)])
    result = project.run("run", *args)
    assert result.code == 2 and error in result.err, result
    assert project.runs() == []


def test_evaluate_from_python_returns_the_stored_run_as_data(project):
    import subprocess
    import sys

    project.cases([case(i, ok=i % 4 != 0) for i in range(20)])
    script = '''
import json, oloproof
doc = oloproof.evaluate("oloproof.yaml", filters=["metadata.topic=even"], sample=6, seed=2)
print(json.dumps(doc))
try:
    oloproof.evaluate("oloproof.yaml", filters=["metadata.topic=none"])
except oloproof.ConfigError as exc:
    print(exc)
'''
    proc = subprocess.run([sys.executable, "-c", script], cwd=project.root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    first, error = proc.stdout.splitlines()
    doc = json.loads(first)
    assert doc["format"] == "oloproof.run" and doc["run"]["cases"] == 6
    assert doc["run"]["selection"]["of"] == 20 and doc["run"]["selection"]["flags"] == (
        "--filter metadata.topic=even --sample 6 --seed 2")
    (metric,) = doc["metrics"]
    assert metric["observed"] == 6 and metric["display"]["counts"].endswith("0 missing · 0 excluded")
    ids = [r["id"] for r in map(json.loads, project.run("export", doc["run"]["id"]).out and (
        project.root / ".oloproof" / "bundles" / doc["run"]["id"] / "cases.jsonl").read_text().splitlines())]
    assert len(ids) == 6 and all(int(i[1:]) % 2 == 0 for i in ids)
    assert metric["successes"] == sum(1 for i in ids if int(i[1:]) % 4 != 0)
    assert error.startswith("--filter: metadata.topic=none matches none of the 20 cases")
    assert len(project.runs()) == 1
