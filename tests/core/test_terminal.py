"""What a person at a terminal sees: `inspect --case` as sections and tables, tables fitted to the
terminal's width, colour (never with NO_COLOR, never off a terminal), the progress line, and the
slice table's criteria and number formats. Terminals are real pseudo-terminals (``os.openpty``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import case, olo

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def on_terminal(*args: str, cwd: Path, columns: int = 60, stdout_tty: bool = True, stderr_tty: bool = False,
                env: dict | None = None, timeout: float = 120) -> tuple[int, str, str]:
    """Run ``oloproof`` with standard output and/or standard error on a pseudo-terminal of
    ``columns`` columns; returns (exit code, stdout, stderr), the terminal's \\r\\n made \\n."""
    master, slave = os.openpty()
    full_env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full_env.update({"COLUMNS": str(columns), "PYTHONIOENCODING": "utf-8", **(env or {})})
    proc = subprocess.Popen([sys.executable, "-m", "oloproof", *args], cwd=cwd, env=full_env,
                            stdin=subprocess.DEVNULL, stdout=slave if stdout_tty else subprocess.PIPE,
                            stderr=slave if stderr_tty else subprocess.PIPE)
    os.close(slave)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    out, err = proc.communicate(timeout=timeout)
    reader.join(timeout=10)
    os.close(master)
    tty = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    piped_out = (out or b"").decode("utf-8")
    piped_err = (err or b"").decode("utf-8")
    return proc.returncode, tty if stdout_tty else piped_out, tty if stderr_tty else piped_err


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def staged(tmp_path: Path) -> Path:
    """The bundled staged example, run once."""
    root = tmp_path / "p"
    assert olo("init", "--example", "support_rag", str(root), cwd=tmp_path).code == 0
    assert olo("run", cwd=root).code == 3
    return root


def test_inspect_case_shows_the_retrieval_context_citations_and_judgments(tmp_path):
    root = staged(tmp_path)
    shown = olo("inspect", "latest", "--case", "refund_review", cwd=root)
    assert shown.code == 0, shown
    lines = shown.out.splitlines()
    assert lines[0].startswith("Case refund_review of run_")
    assert ["Input", "  question: On which day does support review a refund request on an annual plan?"] == lines[1:3]
    assert "  answer: same business day" in lines
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in lines if line.startswith("│")]
    assert rows[0] == ["rank", "score", "id", "relevant", "context"]
    assert rows[1] == ["1", "5.000", "kb-09", "no", "kept"]
    assert rows[2] == ["2", "4.000", "kb-01", "yes (doc)", "dropped: token_budget"]
    assert rows[3][4] == "dropped: top_k"
    assert any(line.startswith("Retrieval: query ") and "depth 6" in line for line in lines)
    assert "Context: 1 passage · 28 of a budget of 40 tokens used · 5 dropped · source retrieval" in lines
    assert "Citations: kb-09: valid" in lines
    judgments = lines[lines.index("Judgments"):]
    assert "  answer_correct: failed (expected_text_not_found)" in judgments and "  hit_rate_at_2: passed" in judgments
    assert "    expected: [\"same business day\"]" in judgments
    assert "    rank: 2" in judgments
    # long text wraps under its key instead of running on for one line
    assert max(len(line) for line in lines if not line.startswith(("│", "┌", "├", "└"))) <= 100
    output = lines.index("Output")
    assert lines[output + 1].startswith("  answer: Every refund request") and lines[output + 2].startswith(" " * 10)

    # --format json is the stored record, unchanged: the same as the exported bundle's
    raw = json.loads(olo("inspect", "latest", "--case", "refund_review", "--format", "json", cwd=root).out)
    assert olo("export", "latest", cwd=root).code == 0
    run_id = json.loads(olo("runs", "--format", "json", cwd=root).out)[-1]["id"]
    bundle = read_jsonl(root / ".oloproof" / "bundles" / run_id / "cases.jsonl")
    exported = next(r for r in bundle if r["id"] == "refund_review")
    assert raw["artifacts"] == exported["artifacts"] and raw["judgments"] == exported["judgments"]
    assert raw["case"]["input"] == exported["input"] and raw["output"] == exported["output"]


RECORDING_APP = """
from oloproof import Context, ContextItem, DroppedItem, Passage, Retrieval, current_case, system

@system(name="rec", version="1", records=("retrieval/v1", "context/v1", "citations/v1"))
def run(input):
    recorder = current_case()
    recorder.retrieval(Retrieval(query=input["q"], depth=3, candidates=(
        Passage(doc_id="kb-1", chunk_id="c1", score=0.9, text="one"),
        Passage(doc_id="kb-1", chunk_id="c2", score=0.8, text="two"),
        Passage(doc_id="kb-2", chunk_id="c1", score=0.5, text="three"))))
    recorder.context(Context(items=(ContextItem(doc_id="kb-1", chunk_id="c1", position=1, tokens=5, text="one"),),
                             dropped=(DroppedItem(doc_id="kb-1", chunk_id="c2", position=2, reason="token_budget"),
                                      DroppedItem(doc_id="kb-2", chunk_id="c1", position=3, reason="top_k")),
                             token_budget=8))
    recorder.citations(["kb-1#c1", "kb-9"])
    return {"answer": input["q"]}
"""


def test_inspect_case_marks_invalid_citations_and_relevance_at_the_run_unit(project):
    project.write("app.py", RECORDING_APP)
    config = (project.root / "oloproof.yaml").read_text() + "  - {type: citation_validity}\n"
    project.write("oloproof.yaml", config + "relevance_unit: chunk\n")
    project.cases([{"id": "c1", "input": {"q": "q"}, "expected": {"answer": "q",
                                                                  "relevant": [{"doc_id": "kb-1", "chunk_id": "c2"}]}}])
    assert project.run("run").code == 0
    lines = project.run("inspect", "latest", "--case", "c1").out.splitlines()
    assert "Retrieval: query \"q\", depth 3, 3 candidates, relevant at relevance_unit chunk" in lines
    assert rows_of("\n".join(lines))[1:] == [["1", "0.900", "kb-1#c1", "no", "kept"],
                                            ["2", "0.800", "kb-1#c2", "yes (chunk)", "dropped: token_budget"],
                                            ["3", "0.500", "kb-2#c1", "no", "dropped: top_k"]]
    assert "Context: 1 passage · 5 of a budget of 8 tokens used · 2 dropped · source retrieval" in lines
    assert "Citations: kb-1#c1: valid · kb-9: invalid (not in the context)" in lines
    assert "  citations_valid: failed (cites_outside_context)" in lines
    assert '    invalid: ["kb-9"]' in lines

    project.write("oloproof.yaml", config)  # counted by document, both chunks of kb-1 are relevant
    assert project.run("run").code == 0
    rows = rows_of(project.run("inspect", "latest", "--case", "c1").out)
    assert [r[3] for r in rows[1:]] == ["yes (doc)", "yes (doc)", "no"]


def test_inspect_case_escapes_control_characters_in_the_output(project):
    project.write("app.py", "from oloproof import system\n\n@system(name='e', version='1')\ndef run(input):\n"
                            "    return {'answer': 'clear \\x1b[2J now\\x1b]0;title\\x07', 'note': 'a\\x9bb'}\n")
    project.cases([case(1)])
    assert project.run("run").code == 0
    shown = project.run("inspect", "latest", "--case", "c001")
    assert shown.code == 0
    assert "\x1b" not in shown.out and "\x07" not in shown.out and "\x9b" not in shown.out
    assert "  answer: clear \\x1b[2J now\\x1b]0;title\\x07" in shown.out
    code, out, _ = on_terminal("inspect", "latest", "--case", "c001", cwd=project.root, columns=200)
    assert code == 0 and "\x1b[2J" not in out and "\x1b]0" not in out


@pytest.mark.slow
def test_tables_fit_the_terminal_and_are_unchanged_off_it(project):
    project.cases([case(i, ok=i % 3 > 0) for i in range(6)])
    assert project.run("run").code == 0
    assert project.run("run", "--no-cache").code == 0
    piped = project.run("runs").out
    assert max(len(line) for line in piped.splitlines()) > 60  # as wide as its content off a terminal
    code, out, _ = on_terminal("runs", cwd=project.root, env={"NO_COLOR": "1"})
    assert code == 0
    lines = out.splitlines()
    assert lines and max(len(line) for line in lines) <= 60, out
    assert "\x1b" not in out
    # every run id is there whole: a table too narrow for it is shown one field a line
    assert all(f"run      {run_id}" in lines for run_id in project.runs()), out
    # COLUMNS alone (no terminal) changes nothing
    assert project.run("runs", env={"COLUMNS": "60"}).out == piped


@pytest.mark.slow
def test_colour_on_a_terminal_only_and_never_with_no_color(project):
    project.write("policy.yaml", """
        version: 1
        confidence_level: 0.95
        block_on: [FAIL]
        rules:
          - {id: all-correct, metric: answer_correct, kind: observed_count, max_failures: 0}
        """)
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "policy: policy.yaml\n")
    project.cases([case(1), case(2, ok=False)])
    code, out, _ = on_terminal("run", cwd=project.root, columns=200)
    assert code == 1
    assert "Gate: \x1b[31mBLOCK\x1b[0m (exit 1)" in out
    assert "\x1b[31mFAIL\x1b[0m" in out
    failures = on_terminal("inspect", "latest", "--failures", cwd=project.root, columns=200)[1]
    assert "answer_correct: \x1b[31mfailed\x1b[0m" in failures
    plain = on_terminal("run", cwd=project.root, columns=200, env={"NO_COLOR": "1"})[1]
    assert "\x1b" not in plain and "Gate: BLOCK (exit 1)" in plain
    piped = project.run("run", env={"NO_COLOR": ""})
    assert "\x1b" not in piped.out and "Gate: BLOCK (exit 1)" in piped.out


SLOW_APP = """
import time
from oloproof import system

@system(name="slow", version="1")
def run(input):
    time.sleep(0.05)
    return {"answer": input["q"]}
"""


@pytest.mark.slow
def test_progress_line_on_a_terminal_with_elapsed_rate_left_and_judge_calls(project):
    project.write("app.py", SLOW_APP)
    project.write("replies.jsonl", '{"match": "answer", "verdict": "pass", "rationale": "ok"}\n')
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + """
concurrency: 1
""".replace("concurrency: 1", """  - type: rubric_judge
    criterion: helpful
    rubric: The answer answers.
    provider: replay
    model: replay
    provider_options: {file: replies.jsonl, default: fail}
concurrency: 1"""))
    project.cases([case(i) for i in range(20)])
    code, out, err = on_terminal("run", cwd=project.root, stdout_tty=False, stderr_tty=True, columns=120)
    assert code == 0, err
    drawn = err.split("\r")
    assert any(re.search(r"\d+/20 cases · 0:0\d elapsed · \d+\.\d/s · 0:0\d left", p) for p in drawn), err
    assert any(re.search(r"40/40 judgments · 20 judge calls · 0:0\d elapsed", p) for p in drawn), err
    assert "cases" not in out.split("\n")[0] and "elapsed" not in out  # standard output carries the report only
    _, _, piped = on_terminal("run", "--no-cache", cwd=project.root, stdout_tty=True, stderr_tty=False)
    assert "elapsed" not in piped  # no progress when standard error is not a terminal


def rows_of(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("│").split("│")] for line in out.splitlines() if line.startswith("│")]


@pytest.mark.slow
def test_per_slice_criteria_limit_that_slices_rows(project):
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + """
  - {type: exact, criterion: exact_answer, field: answer, expected_field: answer}
slices: [{slice: metadata.topic, metrics: [exact_answer]}, metadata.kind]
min_slice_support: 2
""")
    project.cases([{**case(i), "metadata": {"topic": "even" if i % 2 == 0 else "odd", "kind": "k"}}
                   for i in range(4)])
    result = project.run("run")
    assert result.code == 0, result
    rows = rows_of(result.out)
    topic = [r[:2] for r in rows if r[0].startswith("metadata.topic=")]
    assert topic == [["metadata.topic=even", "exact_answer"], ["metadata.topic=odd", "exact_answer"]]
    kind = [r[1] for r in rows if r[0] == "metadata.kind=k"]
    assert kind == ["answer_correct", "exact_answer"]  # the plain form: every criterion

    # the viewer's slice panels and compare's slice differences follow the run's lists
    assert project.run("export", "latest", "--html", "report.html").code == 0
    html = (project.root / "report.html").read_text(encoding="utf-8")
    panel = html[html.index("<b>metadata.topic</b>"):html.index("<b>metadata.kind</b>")]
    assert "<td>exact_answer</td>" in panel and "<td>answer_correct</td>" not in panel
    assert project.run("run", "--no-cache").code == 0
    project.write("compare.yaml", "version: 1\nconfidence_level: 0.95\nblock_on: [FAIL]\nrules:\n"
                                  "  - {id: same, metric: answer_correct, kind: non-inferiority, margin: 0.5}\n")
    runs = project.runs()
    compared = project.run("compare", runs[1], runs[0], "--policy", "compare.yaml", "--slices")
    differences = [line for line in compared.out.splitlines() if line.startswith("  metadata.")]
    assert sorted(line.split(" · ")[1].split(":")[0] for line in differences if "topic=" in line) == [
        "exact_answer", "exact_answer"]
    assert len([line for line in differences if "kind=k" in line]) == 2


@pytest.mark.parametrize("entry, where, problem", [
    ("{slice: metadata.topic, metrics: [answer_corect]}", "$.slices[0].metrics[0]",
     "no criterion 'answer_corect' in this suite; fix: did you mean 'answer_correct'?"),
    ("{slice: metadata.topic, metric: [answer_correct]}", "$.slices[0].metric", "unknown key 'metric'"),
    ("{slice: metadata.topic, metrics: []}", "$.slices[0].metrics", "metrics must be a non-empty list"),
    ("{metrics: [answer_correct]}", "$.slices[0]", "slice must be a slice's name"),
    ("3", "$.slices[0]", "expected a name or a mapping, got 3 (int)"),
])
def test_per_slice_criteria_errors_are_located(project, entry, where, problem):
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + f"slices: [{entry}]\n")
    project.cases([case(1)])
    result = project.run("run")
    assert result.code == 2 and result.out == "", result
    assert "oloproof.yaml:" in result.err and where in result.err and problem in result.err, result.err
    assert project.runs() == []


def test_slice_rows_print_a_criterion_in_one_number_format(tmp_path):
    root = staged(tmp_path)
    cases = read_jsonl(root / "cases.jsonl")
    for row in cases:  # a second relevant document never retrieved: recall 0.5 on one case
        if row["id"] == "seat_count":
            row["expected"]["relevant"].append({"doc_id": "kb-404"})
    (root / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in cases), encoding="utf-8")
    result = olo("run", cwd=root)
    rows = rows_of(result.out)
    overall = next(r for r in rows if r[0] == "recall_at_2")
    assert re.fullmatch(r"0\.\d{3}", overall[1]), overall  # a mean: not every case is 0 or 1
    recall = [r for r in rows if r[1] == "recall_at_2" and "=" in r[0]]
    assert recall and all(re.fullmatch(r"\d\.\d{3}", r[2]) for r in recall), recall
    assert all(r[4].startswith("mean of ") for r in recall)
    assert any(r[2] == "1.000" for r in recall)  # a group where every case recalled all: a mean, not 100.0%
    small = [r for r in rows if "=" in r[0] and int(r[4].split()[2]) < 4]
    assert small and all(r[3] == "—" for r in small)  # below min_slice_support: the row, no interval
