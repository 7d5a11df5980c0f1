"""Errors and exit codes: every error says what is wrong, where, and how to fix it."""

from __future__ import annotations

import enum


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
