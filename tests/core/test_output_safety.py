"""What the command prints and writes can never mislead: a lost standard output exits 2 (never
0, 1 or 3), JUnit XML is well-formed and the Markdown summary harmless whatever a run holds,
reports are written only to regular files, terminal lines escape control characters, and the
last inputs that exited 70 or printed several lines are one-line exit-2 errors."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from conftest import Project

APP = r'''
from oloproof import system

@system(name="sneaky", version="1")
def run(input):
    if input["k"] == "boom":
        raise RuntimeError("\x1b[31mred\x07 <script>alert(1)</script> \u202egnp.exe")
    return {"answer": input["k"]}
'''
CONFIG = """
system:
  name: sneaky
  version: "1"
  callable: app:run
cases: cases.jsonl
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
"""
POLICY = """
policy: policy.yaml
"""


@pytest.fixture
def sneaky(tmp_path) -> Project:
    project = Project(tmp_path)
    project.write("app.py", APP)
    project.write("oloproof.yaml", CONFIG)
    project.cases([{"id": "ok", "input": {"k": "fine"}, "expected": {"answer": "fine"}},
                   {"id": "x\x1b[2Jy", "input": {"k": "boom"}, "expected": {"answer": "fine"}}])
    return project


def shell(project: Project, command: str, env: dict | None = None) -> subprocess.CompletedProcess:
    oloproof = f"{sys.executable} -m oloproof"
    return subprocess.run(["bash", "-c", command.replace("oloproof", oloproof)], cwd=project.root, capture_output=True,
                          text=True, env={**os.environ, "NO_COLOR": "1", **(env or {})}, timeout=120)


def one_line(err: str, expected: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert expected in lines[0], lines[0]


def test_a_lost_standard_output_exits_2_with_one_line(sneaky):
    assert sneaky.run("run").code == 0
    # a closed pipe: the reader is gone before the command writes
    piped = shell(sneaky, "oloproof run | (exec 0<&-; sleep 0); echo \"code=${PIPESTATUS[0]}\" >&2")
    assert "code=2" in piped.stderr, piped
    one_line(piped.stderr.replace("code=2", ""), "error: standard output could not be written: broken pipe")
    for command in ("oloproof run > /dev/full", "oloproof runs > /dev/full", "oloproof inspect latest > /dev/full",
                    "oloproof inspect latest --format json > /dev/full"):
        full = shell(sneaky, command)
        assert full.returncode == 2, (command, full)
        one_line(full.stderr, "error: standard output could not be written: no space left on device")
    closed = shell(sneaky, "oloproof runs >&-")
    assert closed.returncode == 2, closed
    one_line(closed.stderr, "error: standard output is closed")


def test_junit_markdown_and_the_terminal_show_hostile_text_harmlessly(sneaky):
    summary = sneaky.root / "summary.md"
    result = sneaky.run("run", "--junit", "junit.xml", "--junit-cases", "--markdown", "pr.md",
                        env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.code == 0, result
    tree = ET.parse(sneaky.root / "junit.xml")  # well-formed, though a message held ESC and BEL
    messages = " ".join(e.get("message", "") + (e.text or "") for e in tree.iter() if e.tag in ("error", "failure", "skipped"))
    assert "\\x1b[31mred\\x07" in messages, messages
    for page in (sneaky.root / "pr.md", summary):
        text = page.read_text(encoding="utf-8")
        assert "<script>" not in text and "&lt;script&gt;" in text, text
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, text
    # every line printed on a terminal or a log: control characters escaped
    for args in (("run",), ("runs",), ("inspect", "latest", "--failures")):
        shown = sneaky.run(*args)
        assert shown.code == 0, (args, shown)
        assert "\x1b" not in shown.out and "\x07" not in shown.out and "\u202e" not in shown.out, (args, shown.out)
    assert "Missing: 1 of 2 cases produced no output: error: RuntimeError: \\x1b[31mred\\x07" in result.out


@pytest.mark.parametrize("option", ["--junit", "--json", "--markdown", "--report=junit"])
def test_reports_are_written_only_to_regular_files(sneaky, option):
    fifo = sneaky.root / "pipe"
    os.mkfifo(fifo)
    for target, kind in (("/dev/null", "a device"), (str(fifo), "a FIFO"), (str(sneaky.root), "a directory"),
                         ("-", "not to standard output")):
        args = [option, target] if not option.startswith("--report") else ["--report", f"junit={target}"]
        refused = sneaky.run("run", *args)
        assert refused.code == 2, (target, refused)
        one_line(refused.err, kind)
    assert sneaky.runs() == []  # refused before anything ran
    assert sneaky.run("run", *([option, "out.file"] if not option.startswith("--report") else
                               ["--report", "junit=out.file"])).code == 0
    assert (sneaky.root / "out.file").is_file()


def test_export_html_refuses_devices_and_fifos(sneaky):
    assert sneaky.run("run").code == 0
    os.mkfifo(sneaky.root / "pipe")
    for target, kind in (("/dev/null", "a device"), ("pipe", "a FIFO")):
        refused = sneaky.run("export", "latest", "--html", target)
        assert refused.code == 2, refused
        one_line(refused.err, f"--html: {target} is {kind}")
    assert sneaky.run("export", "latest", "--html", "report.html").code == 0


@pytest.mark.parametrize(("args", "expected"), [
    (("view", "--port", "99999"), "error: --port: '99999' is not a port number; fix: pass a number from 1 to 65535"),
    (("run", "--no-such-option"), "error: No such option '--no-such-option'"),
    (("export",), "error: Missing argument 'RUN_ID'; fix: see `oloproof export --help`"),
    (("no-such-command",), "error: No such command 'no-such-command'"),
    (("run", "--limit", "many"), "error: Invalid value for '--limit': 'many' is not a valid integer"),
])
def test_usage_errors_are_one_line_exit_2(sneaky, args, expected):
    result = sneaky.run(*args)
    assert result.code == 2, result
    one_line(result.err, expected)
    assert "Traceback" not in result.text and "Usage:" not in result.text


class Bare:
    """A third party's store with no cache_stats, whose check() returns no counts."""

    shown, damaged = "bare", {}

    def cache_clear(self, ns):
        return 0

    def check(self):
        return {"store": "bare", "problems": []}


def test_cache_clear_and_store_check_on_a_bare_store_are_handled(monkeypatch):
    """The commands' own code, on a store that implements less than the local one (in process: a
    third party's store would come through an installed entry point)."""
    from click.testing import CliRunner

    from oloproof_core.cli import cache as cache_command, store as store_command

    class Opened:
        def __init__(self, *args, **kw):
            self.store = Bare()

        def reader(self):
            return self.store

    monkeypatch.setattr(cache_command, "Project", Opened)
    monkeypatch.setattr(store_command, "Project", Opened)
    cleared = CliRunner().invoke(cache_command.cache, ["clear", "execution"])
    assert cleared.exit_code == 0 and "Cleared execution: 0 entries" in cleared.output, cleared.output
    checked = CliRunner().invoke(store_command.store, ["check"])
    assert checked.exit_code == 1 and "check() returned no counts and problems" in str(checked.exception), checked
