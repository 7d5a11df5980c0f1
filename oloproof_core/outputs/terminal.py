"""What a person at a terminal sees: tables fitted to its width, verdicts in colour, a progress line.

Every renderer produces plain lines; :func:`shown` adapts them to standard output only when it is a
terminal. Anywhere else (a pipe, a file, a CI log) the lines pass unchanged: no width limit, no
colour, no progress line, so scripts and the documented transcripts read the same bytes as
before. Colour is never used when ``NO_COLOR`` is set (https://no-color.org). See docs/runs.md.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Sequence
from typing import TextIO

MIN_COLUMN = 8  # a wrapped column keeps at least this many characters (or its natural width)

RED, GREEN, YELLOW, RESET = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[0m"
# verdicts and judgment words, coloured where they stand as words of their own
_PAINT = [
    (re.compile(r"\b(FAIL|BLOCK)\b"), RED),
    (re.compile(r"\b(PASS)\b"), GREEN),
    (re.compile(r"\b(INSUFFICIENT_EVIDENCE|MANUAL_REVIEW|UNDECIDED|UNMEASURED)\b"), YELLOW),
    (re.compile(r"(?<=: )(failed|invalid)\b"), RED),
    (re.compile(r"(?<=: )(passed|valid)\b"), GREEN),
    (re.compile(r"(?<=: )(missing|excluded|errored)\b"), YELLOW),
    (re.compile(r"(?<=│ )(failed|invalid)(?= )"), RED),
    (re.compile(r"(?<=│ )(passed|valid)(?= )"), GREEN),
]


def is_terminal(stream: TextIO | None = None) -> bool:
    stream = sys.stdout if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream: not a terminal
        return False


def colour_wanted(stream: TextIO | None = None) -> bool:
    """Colour on a terminal, unless ``NO_COLOR`` is set to anything but the empty string."""
    return is_terminal(stream) and not os.environ.get("NO_COLOR")


def width_of(stream: TextIO | None = None) -> int | None:
    """The terminal's width (``COLUMNS`` overrides it), or None when ``stream`` is not a terminal."""
    if not is_terminal(stream):
        return None
    import shutil

    return shutil.get_terminal_size().columns


def text_width(stream: TextIO | None = None, default: int = 100) -> int:
    """The width long free text is wrapped at: the terminal's, else ``default``."""
    return width_of(stream) or default


def shown(lines: Sequence[str], stream: TextIO | None = None) -> list[str]:
    """``lines`` as they go to ``stream`` (standard output): unchanged unless it is a terminal."""
    width = width_of(stream)
    if width is None:
        return list(lines)
    out = fit_tables(lines, width)
    return paint(out) if colour_wanted(stream) else out


def paint(lines: Sequence[str]) -> list[str]:
    """Verdicts in colour: FAIL and BLOCK red, PASS green, the undecided ones yellow."""
    out = []
    for line in lines:
        for pattern, colour in _PAINT:
            line = pattern.sub(lambda m, c=colour: f"{c}{m.group(1)}{RESET}", line)
        out.append(line)
    return out


def fit_tables(lines: Sequence[str], width: int) -> list[str]:
    """Every box-drawn table in ``lines`` (as ``report.table`` draws them) narrowed to ``width``
    columns by wrapping its widest cells; the other lines are left as they are."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("┌") and line.endswith("┐"):
            end = i
            while end < len(lines) and not lines[end].startswith("└"):
                end += 1
            if end < len(lines):
                out += _fit(lines[i:end + 1], width)
                i = end + 1
                continue
        out.append(line)
        i += 1
    return out


def _fit(block: Sequence[str], width: int) -> list[str]:
    natural = [len(segment) - 2 for segment in block[0][1:-1].split("┬")]
    if sum(natural) + 3 * len(natural) + 1 <= width:
        return list(block)
    rows: list[list[str] | None] = []  # None: the rule under the header
    for line in block[1:-1]:
        if line.startswith("├"):
            rows.append(None)
            continue
        cells, at = [], 2
        for w in natural:
            cells.append(line[at:at + w].rstrip())
            at += w + 3
        rows.append(cells)
    whole = [max((len(t) for r in rows if r is not None for t in _WHOLE.findall(r[k])), default=0)
             for k in range(len(natural))]
    widths = narrowed(natural, width - 3 * len(natural) - 1, whole)
    if sum(widths) + 3 * len(widths) + 1 > width:
        return _expanded([r for r in rows if r is not None], width)

    def rule(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * (w + 2) for w in widths) + right

    out = [rule("┌", "┬", "┐")]
    for cells in rows:
        if cells is None:
            out.append(rule("├", "┼", "┤"))
            continue
        wrapped = [wrap(cell, w) for cell, w in zip(cells, widths)]
        for k in range(max(len(w) for w in wrapped)):
            out.append("│ " + " │ ".join((part[k] if k < len(part) else "").ljust(w)
                                         for part, w in zip(wrapped, widths)) + " │")
    out.append(rule("└", "┴", "┘"))
    return out


def _expanded(rows: Sequence[Sequence[str]], width: int) -> list[str]:
    """A table too narrow for its identifiers, one field a line (psql's expanded display): each
    row's cells under the header's names, rows apart by a blank line, empty cells left out."""
    names, body = rows[0], rows[1:]
    pad = max(len(n) for n in names) + 2
    out: list[str] = []
    for cells in body:
        if out:
            out.append("")
        for name, cell in zip(names, cells):
            if cell:
                for k, part in enumerate(wrap(cell, max(MIN_COLUMN, width - pad))):
                    out.append((name if k == 0 else "").ljust(pad) + part)
    return out


def narrowed(natural: Sequence[int], room: int, whole: Sequence[int] = ()) -> list[int]:
    """Column widths summing to at most ``room``: the widest column loses a character at a time,
    none below :data:`MIN_COLUMN` (or its natural width, or an equal share of a narrow terminal,
    at least 3), nor below ``whole[k]``, its longest identifier (a run id, a verdict), which is
    never broken; a table that still cannot fit stays wider."""
    widths = list(natural)
    floor = max(3, min(MIN_COLUMN, room // max(1, len(natural))))
    floors = [max(min(w, floor), whole[k] if k < len(whole) else 0) for k, w in enumerate(natural)]
    while sum(widths) > room:
        widest = max(range(len(widths)), key=lambda k: (widths[k] - floors[k] > 0, widths[k]))
        if widths[widest] <= floors[widest]:
            break
        widths[widest] -= 1
    return widths


# what a table never breaks: run ids, object ids' first characters, verdicts and states
_WHOLE = re.compile(r"\brun_[0-9A-Z]{26}\b|\b[A-Z]{2,}(?:_[A-Z]+)+\b|\b[A-Z]{4,}\b")
# where a word may break when a column is narrower than it: after _ - . = / : (snake_case names,
# slice values, dates), before the break of last resort, inside a word
_SOFT = re.compile(r"(?<=[_\-.=/:])(?=[^_\-.=/:\s])")


def wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces where it can be, then
    after ``_ - . = / :`` inside a word, and only then inside a word; identifiers (:data:`_WHOLE`)
    are never broken when the column is as wide as they are."""
    if len(text) <= width:
        return [text]
    pieces: list[tuple[str, bool]] = []  # (piece, a space before it)
    for n, word in enumerate(text.split(" ")):
        parts, at = [], 0
        for found in _WHOLE.finditer(word):  # an identifier is one piece; the rest breaks softly
            parts += _SOFT.split(word[at:found.start()]) + [found.group()]
            at = found.end()
        parts = [p for p in parts + _SOFT.split(word[at:]) if p] or [""]
        for k, part in enumerate(parts):
            while len(part) > width and not _WHOLE.fullmatch(part):
                pieces.append((part[:width], n > 0 and k == 0))
                part, k = part[width:], 1
            pieces.append((part, n > 0 and k == 0))
    lines: list[str] = []
    line = ""
    for piece, spaced in pieces:
        joined = line + (" " if spaced and line else "") + piece
        if line and len(joined) > width:
            lines.append(line)
            line = piece
        else:
            line = joined
    lines.append(line)
    return lines


def clock(seconds: float) -> str:
    """``0:07``, ``12:30``, ``1:02:03``."""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_text(what: str, count: int, total: int, elapsed: float, judge_calls: int = 0, bar: int = 20) -> str:
    """``██████······ 6/15 cases · 0:03 elapsed · 2.0/s · 0:05 left`` (and the judge calls made)."""
    filled = bar * count // total if total else bar
    parts = [f"{'█' * filled}{'·' * (bar - filled)} {count}/{total} {what}"]
    if judge_calls:
        parts.append(f"{judge_calls} judge call" + ("" if judge_calls == 1 else "s"))
    parts.append(f"{clock(elapsed)} elapsed")
    if count and elapsed > 0:
        rate = count / elapsed
        parts.append(f"{rate:.1f}/s")
        parts.append(f"{clock((total - count) / rate)} left")
    else:
        parts += ["—/s", "—:— left"]
    return " · ".join(parts)


class Progress:
    """The progress line of a run on standard error, redrawn at most ten times a second; silent
    when standard error is not a terminal. The engine calls :meth:`start` for each phase (the
    cases executed, the judgments made), :meth:`step` as each finishes, and :meth:`close`."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = sys.stderr if stream is None else stream
        self.on = is_terminal(self.stream)
        self.what, self.total, self.count, self.calls = "", 0, 0, 0
        self.started = self.last = 0.0
        self.drawn = 0

    def start(self, what: str, total: int) -> None:
        self.what, self.total, self.count, self.calls = what, total, 0, 0
        self.started, self.last = time.monotonic(), 0.0

    def step(self, judge_call: bool = False) -> None:
        self.count += 1
        self.calls += judge_call
        now = time.monotonic()
        if self.on and self.total and (now - self.last > 0.1 or self.count == self.total):
            self.last = now
            text = progress_text(self.what, self.count, self.total, now - self.started, self.calls)
            width = width_of(self.stream) or 80
            text = text[:width - 1]
            self.stream.write("\r" + text.ljust(self.drawn))
            self.stream.flush()
            self.drawn = len(text)

    def close(self) -> None:
        if self.on and self.drawn:
            self.stream.write("\r" + " " * self.drawn + "\r")
            self.stream.flush()
            self.drawn = 0
