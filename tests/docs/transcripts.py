"""Run the console transcripts of the docs and compare what the product prints with them.

A ```console block is a sequence of ``$ command`` lines, each followed by the output it prints.
All blocks of one page run in order in one fresh directory. ``oloproof`` runs as
``python -m oloproof``; other commands run in bash; ``cd DIR`` changes directory; a command ending
in ``&`` starts in the background (a server) and is stopped when the page ends. In commands,
``RUN_ID`` (and ``BASELINE_RUN_ID``) stand for the run id the latest ``oloproof run`` printed,
``CANDIDATE_RUN_ID`` for the latest and ``BASELINE_RUN_ID`` for the one before it once there are
two, and ``DIAGNOSIS_ID`` for the latest diagnosis id. A trailing ``# exit N`` on a command line
checks its exit code.

Expected output is matched as the acceptance walk of the docs matches it: run ids and sha256 ids
are masked; an abbreviated id (``run_…``, ``sha256:50a6124f…``) stands for any; table rows are
compared cell by cell; blank and border lines are layout; ``...`` marks output the docs leave out;
the documented lines must appear in order.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

RUN_ID = r"run_[0-9A-HJKMNP-TV-Z]{26}"
SHA_ID = r"sha256:[0-9a-f]{64}"
BOX = {chr(c) for c in range(0x2500, 0x2580)}


FENCE = re.compile(r'^```(\w+)([^\n]*)\n(.*?)^```', re.S | re.M)
SKIP = "<!-- not run here"


def blocks(markdown: str) -> list[list[tuple[str, list[str]]]]:
    """Every console block of a page, in order: a list of (command, expected lines). A code block
    titled with a file name (```python title="rerank.py") becomes the step ``("<file> NAME", lines)``,
    which writes that file where the transcript is. A console block right after an HTML comment
    starting ``<!-- not run here`` is shown, not run (the comment says what runs it instead)."""
    out = []
    for match in FENCE.finditer(markdown):
        lang, info, body = match.groups()
        before = markdown[:match.start()].rstrip().splitlines()[-1:] or [""]
        title = re.search(r'title="([^"]+)"', info)
        if lang == "console" and not before[0].startswith(SKIP):
            steps: list[tuple[str, list[str]]] = []
            for line in body.splitlines():
                if line.startswith("$ "):
                    steps.append((line[2:], []))
                elif steps:
                    steps[-1][1].append(line)
            out.append(steps)
        elif title:
            out.append([(f"<file> {title.group(1)}", body.splitlines())])
    return out


def mask(line: str) -> str:
    line = re.sub(SHA_ID, "sha256:<id>", line)
    line = re.sub(r"sha256:[0-9a-f]{1,63}…", "sha256:<id>", line)
    line = re.sub(RUN_ID, "run_<id>", line)
    return line.replace("run_…", "run_<id>")


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("│").split("│")]


def same(expected: str, got: str) -> bool:
    if expected.lstrip().startswith("│"):
        return got.lstrip().startswith("│") and [mask(c) for c in cells(expected)] == [mask(c) for c in cells(got)]
    return mask(expected.rstrip()) == mask(got.rstrip())


def significant(lines: list[str]) -> list[str]:
    return [line for line in lines if not all(ch.isspace() or ch in BOX for ch in line)]


def find(expected: list[str], got: list[str]) -> str | None:
    """None when every documented segment appears in order; else the first line not found."""
    segments, current = [], []
    for line in significant(expected):
        if line.strip() == "...":
            if current:
                segments.append(current)
            current = []
        else:
            current.append(line)
    if current:
        segments.append(current)
    got = significant(got)
    position = 0
    for segment in segments:
        for start in range(position, len(got) - len(segment) + 1):
            if all(same(e, g) for e, g in zip(segment, got[start:start + len(segment)])):
                position = start + len(segment)
                break
        else:
            return segment[0]
    return None


class Page:
    """One page's transcripts, run in ``root``."""

    def __init__(self, root: Path):
        self.root = self.cwd = root
        self.runs: list[str] = []
        self.diagnoses: list[str] = []
        self.servers: list[subprocess.Popen] = []
        self.env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8", "COLUMNS": "400"}

    def substitute(self, command: str) -> str:
        if len(self.runs) >= 2:
            command = command.replace("CANDIDATE_RUN_ID", self.runs[-1]).replace("BASELINE_RUN_ID", self.runs[-2])
        if self.runs:
            command = command.replace("RUN_ID", self.runs[-1])
        if self.diagnoses:
            command = command.replace("DIAGNOSIS_ID", self.diagnoses[-1])
        return command

    def run(self, command: str, expected: list[str] | None = None) -> tuple[int, list[str]]:
        if command.startswith("<file> "):  # a file the page shows: write it where the user is
            (self.cwd / command[len("<file> "):]).write_text("\n".join(expected or []) + "\n", encoding="utf-8")
            return 0, []
        command, _, want = command.partition("  # exit ")
        command = self.substitute(command.strip())
        words = shlex.split(command)
        if words[0] == "cd":
            self.cwd = (self.cwd / words[1]).resolve()
            return 0, []
        if command.endswith("&"):
            return self.background(shlex.split(command[:-1]))
        argv = [sys.executable, "-m", "oloproof", *words[1:]] if words[0] == "oloproof" else ["bash", "-c", command]
        if words[0] == "python":
            argv = [sys.executable, *words[1:]]
        proc = subprocess.run(argv, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
        lines = (proc.stdout + proc.stderr).splitlines()
        if words[0] == "oloproof" and len(words) > 1 and words[1] == "run":
            self.runs += re.findall(rf"^Run ({RUN_ID})", proc.stdout, flags=re.M)[:1]
        self.diagnoses += re.findall(rf"^Diagnosis ({SHA_ID})", proc.stdout, flags=re.M)
        if want and proc.returncode != int(want):
            raise AssertionError(f"`{command}` exited {proc.returncode}, the docs say {want}:\n{proc.stdout}{proc.stderr}")
        return proc.returncode, lines

    def background(self, argv: list[str]) -> tuple[int, list[str]]:
        if argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        proc = subprocess.Popen(argv, cwd=self.cwd, env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        self.servers.append(proc)
        port = next((int(w) for w in argv if w.isdigit()), None)
        deadline = time.monotonic() + 20
        while port and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        return 0, []

    def close(self) -> None:
        for proc in self.servers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(10)


def check_page(path: Path, root: Path) -> None:
    """Run every console block of ``path`` in ``root``; raise AssertionError on a mismatch."""
    page = Page(root)
    try:
        for steps in blocks(path.read_text(encoding="utf-8")):
            for command, expected in steps:
                _, got = page.run(command, expected)
                if command.startswith("<file> "):
                    continue
                missing = find(expected, got)
                if missing is not None:
                    raise AssertionError(f"{path.name}: `{command}` did not print the documented line\n"
                                         f"  {missing}\n--- it printed ---\n" + "\n".join(got))
    finally:
        page.close()
