"""Write docs/cli.md from the click command tree: every command, argument and option.

Run ``python scripts/cli_reference.py`` after changing the CLI; a test fails while the page is
out of date, so no option can go undocumented.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import click

from oloproof_core.cli import cli

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def describe(command: click.Command, path: list[str]) -> list[str]:
    name = " ".join(path)
    ctx = click.Context(command, info_name=name)
    out = [f"## `{name}`", "", inspect.cleandoc(command.help or ""), "", "```", command.get_usage(ctx).strip(), "```", ""]
    params = [p for p in command.params if p.name != "help"]
    if params:
        out += ["| argument or option | meaning |", "| --- | --- |"]
        for param in params:
            if isinstance(param, click.Option):
                flag = ", ".join(f"`{o}`" for o in param.opts)
                if not param.is_flag and param.metavar:
                    flag += f" `{param.metavar}`"
                meaning = (param.help or "").replace("|", "\\|")
                if param.required:
                    meaning += " Required."
            else:
                flag, meaning = f"`{param.human_readable_name}`", "(argument)"
            out.append(f"| {flag} | {meaning} |")
        out.append("")
    if isinstance(command, click.Group):  # the group of `oloproof` loads its plugins' commands when listed
        for sub in sorted(command.list_commands(ctx)):
            out += describe(command.get_command(ctx, sub), [*path, sub])
    return out


def render() -> str:
    lines = ["# Command-line reference", "",
             "Generated from the command definitions by `scripts/cli_reference.py`. Every command exits 0 on",
             "success and 2 on a usage, config, input, environment or storage error (one line: what, where,",
             "and the fix); `run` and `compare` exit 1 when a blocking rule FAILed and 3 when blocked",
             "without a FAIL; an interrupted command exits 130; a bug in Oloproof or a plugin exits 70, so a",
             "crash is never taken for a gate's verdict. Any command takes `--debug` to show the traceback",
             "behind an error. The commands that read a project's runs (`runs`, `inspect`, `export`,",
             "`compare`, `diagnose`, `view`, `cache`, `store check`) stop with exit 2 and create nothing",
             "where there is neither an `oloproof.yaml` nor a `.oloproof/` store (and no `--config`,",
             "`--store` or `OLOPROOF_STORE`). `latest` names the newest run of the project wherever a run",
             "id is taken.", ""]
    lines += describe(cli, ["oloproof"])
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    PAGE.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {PAGE.name}\n")
