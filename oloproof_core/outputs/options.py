"""The command-line options of the files a CI reads, shared by ``oloproof run`` and ``compare``."""

from __future__ import annotations

import os

import click


def output_options(command):
    """``--junit``, ``--junit-cases``, ``--json`` and ``--markdown``."""
    for option in reversed((
        click.option("--junit", "junit", metavar="FILE", default=None,
                     help="Also write JUnit XML: one test case a policy rule."),
        click.option("--junit-cases", is_flag=True, help="With --junit: also one test case a case x criterion."),
        click.option("--json", "json_file", metavar="FILE", default=None,
                     help="Also write the results as a versioned JSON document (docs/gates-in-ci.md)."),
        click.option("--markdown", metavar="FILE", default=None,
                     help="Also write a Markdown summary for a pull-request comment "
                          "(appended to $GITHUB_STEP_SUMMARY whenever that is set)."),
    )):
        command = option(command)
    return command


def outputs_wanted(junit: str | None, junit_cases: bool, json_file: str | None, markdown: str | None) -> bool:
    """Whether any file is to be written; checked before the command does its work."""
    if junit_cases and not junit:
        raise click.UsageError("--junit-cases adds to the --junit file; pass --junit FILE too")
    return bool(junit or json_file or markdown or os.environ.get("GITHUB_STEP_SUMMARY"))
