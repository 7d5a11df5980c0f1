"""Errors and exit codes: every error says what is wrong, where, and how to fix it."""

from __future__ import annotations

import enum
from pathlib import Path


class ExitCode(enum.IntEnum):
    """The documented exit codes of every command."""

    OK = 0  # nothing the policy blocks on
    FAIL = 1  # a blocking rule FAILed
    USAGE = 2  # a usage, config, input or plugin error: no decision could be made
    BLOCKED = 3  # blocked without a FAIL (INSUFFICIENT_EVIDENCE, MANUAL_REVIEW)
    INTERNAL = 70  # a bug in Oloproof or a plugin (never mistaken for a gate's verdict)
    INTERRUPTED = 130


class OloproofError(Exception):
    """Base of every error Oloproof reports to the user (exit 2, no traceback)."""

    def __init__(self, problem: str, *, where: str | None = None, fix: str | None = None):
        self.problem, self.where, self.fix = problem, where, fix
        super().__init__(self.render())

    def render(self) -> str:
        """One line: ``where: problem; fix: action``."""
        text = f"{self.where}: {self.problem}" if self.where else self.problem
        return f"{text}; fix: {self.fix}" if self.fix else text


class OutputLost(OloproofError):
    """Standard output could not be written (a closed pipe, a full disk): whatever the command
    decided, nobody saw it, so it exits 2, never a gate's code (docs/cli.md)."""


class ConfigError(OloproofError):
    """The user's configuration, case file or command line is wrong.

    An attrs validator of an options class may pass ``key=attribute.name``: the error is then
    located at that key of the YAML block, not at the block.
    """

    def __init__(self, problem: str, *, where: str | None = None, fix: str | None = None,
                 key: str | None = None):
        self.key = key
        super().__init__(problem, where=where, fix=fix)


class PluginError(OloproofError):
    """A plugin failed to import or register, or two plugins clash."""


class ArtifactError(OloproofError):
    """A system recorded an artifact that is malformed or undeclared; nothing is stored."""


class EvaluationError(Exception):
    """An expected per-case failure of a plugin (a rate-limited judge, say).

    The runner records it on that case's judgment as missing, with the message as its reason.
    """


class CaseMissing(Exception):
    """Raised by a system when a case produced no output for a known reason (``http_error: 503``).

    The case is recorded as missing with exactly that reason, and the run goes on.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _os_fix(exc: OSError) -> str:
    import errno

    return {errno.ENOSPC: "free some disk space and run again",
            errno.EFBIG: "raise the file size limit (ulimit -f) or free some space, and run again",
            errno.EDQUOT: "free some of your disk quota and run again",
            errno.EACCES: "check the permissions of that path",
            errno.EPERM: "check the permissions of that path",
            errno.EROFS: "run where the file system is writable",
            errno.ELOOP: "fix the symbolic link loop",
            errno.EISDIR: "name a file, not a directory",
            errno.ENOTDIR: "check each folder of the path"}.get(exc.errno, "check that path and run again")


def error_line(exc: BaseException) -> tuple[str, ExitCode]:
    """The one line an error prints, and the exit code: 2 for anything the user or the
    environment can fix, ``INTERNAL`` for a bug."""
    if isinstance(exc, OloproofError):
        return exc.render(), ExitCode.USAGE
    if isinstance(exc, OSError):
        problem = exc.strerror or str(exc)
        problem = problem[:1].lower() + problem[1:]
        if exc.filename is None:
            return f"{problem}; fix: {_os_fix(exc)}", ExitCode.USAGE
        where = str(exc.filename)
        try:
            where = str(Path(where).resolve().relative_to(Path.cwd().resolve()))
        except (ValueError, OSError, TypeError, RuntimeError):
            pass
        return f"{where}: {problem}; fix: {_os_fix(exc)}", ExitCode.USAGE
    if type(exc).__module__ == "sqlite3":  # a store that did not translate its own errors
        return (f"the store could not be used: {exc}; fix: check the disk and its permissions, "
                "then run `oloproof store check`", ExitCode.USAGE)
    if isinstance(exc, MemoryError):
        return "out of memory; fix: lower `concurrency:` or split the case file", ExitCode.USAGE
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return (f"internal error: {type(exc).__name__}{': ' + text if text else ''}; this is a bug: rerun with "
            "--debug for the traceback and report it", ExitCode.INTERNAL)
