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
             "behind an error; on `run`, `--debug` also prints, on standard error, where the system's own",
             "code raised for each case it raised on (the project's frames: file, line and source line,",
             "stored with the case and shown by `inspect RUN_ID --case ID` at any time).",
             "The commands that read a project's runs (`runs`, `inspect`, `export`,",
             "`compare`, `diagnose`, `view`, `cache`, `store check`) stop with exit 2 and create nothing",
             "where there is neither an `oloproof.yaml` nor a `.oloproof/` store (and no `--config`,",
             "`--store` or `OLOPROOF_STORE`). `latest` names the newest run of the project wherever a run",
             "id is taken, `previous` (or `latest~1`) the run before it and `latest~N` the N-th before it",
             "(a diagnosis's child runs are not counted).", "",
             "On a terminal, tables are fitted to its width by wrapping their widest cells at spaces, then",
             "after `_ - . = / :`; a run id or a verdict is never broken, and a table too narrow to hold",
             "them whole is shown one field a line (as psql's expanded display). Off a terminal (a pipe, a",
             "file, a CI log) the lines are printed as they are.", "",
             "A usage error (an unknown option or command, a missing argument, a value out of range such",
             "as `view --port 99999`) is one line too, exit 2: `error: No such option '--nope'; fix: see",
             "...`. **Standard output that cannot be written** (a closed pipe, `oloproof run",
             "| true`; a full disk, `> /dev/full`; a closed descriptor, `>&-`) exits 2 with one line on",
             "standard error where that is writable (`error: standard output could not be written: broken",
             "pipe; ...`), never 0, 1 or 3: nobody saw the verdict, so no verdict is given. What the command",
             "did stays done (a run is stored; `oloproof runs` lists it). Every line printed shows control",
             "characters (C0 but tab and line feed, DEL, C1, and the bidirectional controls U+202A-U+202E,",
             "U+2066-U+2069) as escapes (`\\x1b`, `\\u202e`), whatever a system, a service or a judge returned.",
             "The files `--junit`, `--json`, `--markdown`, `--report NAME=FILE` and `export --html` name are",
             "written only if they are absent or regular files: a device, a FIFO, a socket or a directory",
             "is refused before anything runs (exit 2, one line), and so is `-` (reports are files; print a",
             "run's JSON document with `oloproof inspect RUN_ID --format json`).", ""]
    lines += describe(cli, ["oloproof"])
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    PAGE.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {PAGE.name}\n")
