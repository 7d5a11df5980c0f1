"""The command-line options of the files a CI reads, shared by ``oloproof run`` and ``compare``."""

from __future__ import annotations

import os

import click


def output_options(command):
    """``--junit``, ``--junit-cases``, ``--json``, ``--markdown`` and ``--report``."""
    for option in reversed((
        click.option("--junit", "junit", metavar="FILE", default=None,
                     help="Also write JUnit XML: one test case a policy rule."),
        click.option("--junit-cases", is_flag=True, help="With --junit: also one test case a case x criterion."),
        click.option("--json", "json_file", metavar="FILE", default=None,
                     help="Also write the results as a versioned JSON document (docs/gates-in-ci.md)."),
        click.option("--markdown", metavar="FILE", default=None,
                     help="Also write a Markdown summary for a pull-request comment "
                          "(appended to $GITHUB_STEP_SUMMARY whenever that is set)."),
        click.option("--report", "reports", metavar="NAME=TARGET", multiple=True,
                     help="Also write TARGET with the reporter NAME (a plugin's, or junit, json, markdown); "
                          "repeat for more (docs/plugins.md)."),
    )):
        command = option(command)
    return command


def wanted_reports(junit: str | None, junit_cases: bool, json_file: str | None, markdown: str | None,
                   reports: tuple[str, ...] = ()) -> list[tuple[str, str | None, bool]]:
    """The reporters to call, ``(name, target, gets the case records)``, checked before the
    command does its work: ``--junit`` is the ``junit`` reporter, ``--report NAME=TARGET`` any."""
    if junit_cases and not junit:
        raise click.UsageError("--junit-cases adds to the --junit file; pass --junit FILE too")
    wanted: list[tuple[str, str | None, bool]] = []
    if junit:
        wanted.append(("junit", junit, junit_cases))
    if json_file:
        wanted.append(("json", json_file, False))
    if markdown or os.environ.get("GITHUB_STEP_SUMMARY"):
        wanted.append(("markdown", markdown, False))
    for spec in reports:
        name, sep, target = spec.partition("=")
        if not sep or not name or not target:
            raise click.UsageError(f"--report {spec!r}: expected NAME=TARGET, e.g. --report junit=results.xml")
        wanted.append((name, target, True))
    from oloproof_core.config.files import regular_target

    for name, target, _ in wanted:  # refused before any work: a device or a FIFO is never a report
        if target:
            regular_target(target, f"--report {name}" if name not in ("junit", "json", "markdown") else f"--{name}")
    return wanted
