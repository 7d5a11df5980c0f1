"""Standard output and error as a command writes them: a write to standard output that fails (a
closed pipe, ``oloproof run | true``; a full disk, ``> /dev/full``) is :class:`OutputLost`, which
the command line turns into exit 2 and one line on standard error where that is writable, never the
code the command would have given (docs/cli.md); and every terminal line is printed with its
control characters escaped."""

from __future__ import annotations

import io
import os
import re
import sys

from oloproof_core.model.errors import ExitCode, OutputLost


class _GuardedOut(io.FileIO):
    """File descriptor 1, whose first failed write raises OutputLost; later writes are dropped
    (the interpreter's last flush at exit must not fail again)."""

    lost = False

    def write(self, data) -> int:
        if self.lost:
            return len(data)
        try:
            return super().write(data)
        except OSError as exc:
            self.lost = True
            raise OutputLost(f"standard output could not be written: {_reason(exc)}",
                             fix="send the output somewhere it can be written; the command's work is done "
                                 "(a run is stored: see `oloproof runs`)") from None


def _reason(exc: OSError) -> str:
    text = exc.strerror or type(exc).__name__
    return text[:1].lower() + text[1:]


def guard_stdout() -> bool:
    """Put the guard on standard output; False when there is none (descriptor 1 closed)."""
    stream = sys.stdout
    if stream is None:
        return False
    try:
        fd = stream.fileno()
        os.fstat(fd)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return stream is not None  # not a real descriptor (a test's capture): left as it is
    if fd != 1:
        return True
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(_GuardedOut(1, "w", closefd=False)),
                                  encoding=stream.encoding, errors=stream.errors,
                                  line_buffering=stream.line_buffering, write_through=False)
    return True


def say_error(line: str) -> None:
    """One line on standard error, if it can be written at all."""
    try:
        sys.stderr.write(escape_controls(line) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def output_lost(exc: BaseException) -> int:
    """The exit of a command whose standard output failed: exit 2, one line on standard error."""
    if isinstance(exc, OutputLost):
        say_error(f"error: {exc.render()}")
    else:
        say_error(f"error: standard output could not be written: {_reason(exc) if isinstance(exc, OSError) else exc}")
    try:  # nothing more goes there: the interpreter's flush at exit finds nothing to write
        sys.stdout = open(os.devnull, "w")
    except OSError:
        pass
    return ExitCode.USAGE


# C0 but tab and line feed, DEL and C1, and the bidirectional controls that reorder what a
# terminal shows (U+202A-U+202E, U+2066-U+2069)
_CONTROLS = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"


def escape_controls(text: str) -> str:
    """``text`` with every control character but tab and line feed shown as an escape: C0 and
    DEL as ``\\x1b``, C1 and the bidirectional controls as ``\\u009b``, ``\\u202e`` (an escape
    JSON reads back as the same character, so a JSON document printed stays valid)."""
    return re.sub(_CONTROLS, _escape, text)  # compiled on first use (re's cache), not at import


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"
