"""The ``oloproof`` command line: the group, its commands from plugins, errors mapped to exit codes.

Every command is a plugin's: a module implementing ``oloproof_register_commands(cli)`` adds it
with ``cli.add_command``. The builtin commands are the modules of this package (one a command)
and the viewer's; a third-party distribution adds its own through its ``oloproof`` entry point
(docs/plugins.md). Heavy modules (scipy, httpx, the plugins) are imported only by the commands
that need them, so ``oloproof --help`` starts fast.
"""

from __future__ import annotations

import sys

import click

from oloproof_core.model.errors import ExitCode, OutputLost, error_line

# The builtin command plugins, each a module implementing ``oloproof_register_commands``: the group
# calls a builtin's hook itself when its name is asked for (as pytest registers its own plugins),
# so `oloproof run` imports one command module; other distributions' commands come through the
# plugin manager.
BUILTIN_COMMANDS = {name: f"oloproof_core.cli.{name}" for name in (
    "cache", "cases", "compare", "diagnose", "export", "headroom", "init", "inspect", "judge", "plugins", "run",
    "runs", "store",
)} | {"view": "oloproof_core.viewer.command", "label": "oloproof_core.viewer.label_command"}


class PluginGroup(click.Group):
    """A group whose commands plugins add. A builtin command's name imports that command's
    module alone; the list (``oloproof --help``) and any other name also load the command plugins
    of other distributions (their ``oloproof`` entry points). A plugin's command named like a
    builtin is not added: the builtin keeps its name."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._builtin_loading = False
        self._others_loaded = False

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if self._builtin_loading or (name or cmd.name) not in BUILTIN_COMMANDS:
            super().add_command(cmd, name)

    def _load_builtin(self, name: str) -> None:
        import importlib

        if name in self.commands:
            return
        self._builtin_loading = True
        try:
            importlib.import_module(BUILTIN_COMMANDS[name]).oloproof_register_commands(cli=self)
        finally:
            self._builtin_loading = False

    def _load_others(self) -> None:
        from oloproof_core.hooks.discovery import others_may_exist

        if self._others_loaded:
            return
        self._others_loaded = True
        if others_may_exist():
            from oloproof_core.hooks.manager import command_plugins

            for impl in reversed(command_plugins().hook.oloproof_register_commands.get_hookimpls()):
                impl.function(cli=self)

    def list_commands(self, ctx: click.Context) -> list[str]:
        for name in BUILTIN_COMMANDS:
            self._load_builtin(name)
        self._load_others()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in BUILTIN_COMMANDS:
            self._load_builtin(cmd_name)
        else:
            self._load_others()
        return super().get_command(ctx, cmd_name)


@click.group(cls=PluginGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="oloproof")
def cli() -> None:
    """Evaluate a RAG or LLM system: run a suite, gate a release, compare runs, diagnose failures.

    Add --debug to any command to see the traceback behind an error.
    """


def _on_interrupt() -> None:
    """The first Ctrl-C stops the command cleanly (a run stores what finished and prints its
    report); a second one exits at once, with no traceback."""
    import os
    import signal

    def handler(signum, frame) -> None:
        if handler.count:
            os.write(2, b"Interrupted again: exiting now.\n")
            os._exit(ExitCode.INTERRUPTED)
        handler.count += 1
        raise KeyboardInterrupt

    handler.count = 0
    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread (an embedding test runner): keep Python's default
        pass


def _dispatch(debug: bool) -> int:
    from oloproof_core.cli.streams import guard_stdout, output_lost, say_error

    if not guard_stdout():
        say_error("error: standard output is closed; fix: run the command with its output going somewhere "
                  "(a file, a pipe, /dev/null)")
        return ExitCode.USAGE
    try:
        cli.main(standalone_mode=False)
    except SystemExit as exc:
        if isinstance(exc.__context__, BrokenPipeError):  # click's own answer to EPIPE: exit 1, the FAIL code
            return output_lost(exc.__context__)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else ExitCode.USAGE)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:  # a usage error: one line, as every other error
        say_error(f"error: {usage_line(exc)}")
        return ExitCode.USAGE
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return ExitCode.INTERRUPTED
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return ExitCode.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - every error is one line; --debug adds the traceback
        if debug:
            import traceback

            traceback.print_exc()
        if isinstance(exc, OutputLost):
            return output_lost(exc)
        line, code = error_line(exc)
        say_error(f"error: {line}")
        return code
    return ExitCode.OK


def usage_line(exc: click.ClickException) -> str:
    """A click usage error as one line: what is wrong and the command's help to read."""
    text = " ".join(exc.format_message().split()).rstrip(".")
    names, ctx = [], getattr(exc, "ctx", None)
    while ctx is not None and ctx.parent is not None:  # the subcommands, not how Python was started
        names.insert(0, ctx.info_name)
        ctx = ctx.parent
    return f"{text}; fix: see `{' '.join(['oloproof', *names])} --help`"


def main() -> None:
    """Entry point: run the command; user errors print one line and exit 2, a bug exits
    ``ExitCode.INTERNAL`` with a one-line message.

    ``--debug`` (anywhere on the command line) or ``OLOPROOF_DEBUG=1`` adds the traceback.
    """
    import os

    debug = "--debug" in sys.argv or os.environ.get("OLOPROOF_DEBUG") == "1"
    if "--debug" in sys.argv:
        sys.argv.remove("--debug")
    _on_interrupt()
    import gc

    # A run holds every case's records until it stores them; at the default threshold (700) the
    # collector traverses them all again and again: a sixth of the CPU of 100,000 cases
    # (benchmarks/targets.py). This process is ours: collect less often.
    gc.set_threshold(50_000, 10, 10)
    code = _dispatch(debug)
    try:  # what is still buffered: a failure here is a lost output too, never exit 120
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OutputLost, OSError, ValueError) as exc:
        from oloproof_core.cli.streams import output_lost

        code = output_lost(exc)
    if code == ExitCode.INTERRUPTED:
        # calls still in flight in worker threads (a system, a judge) are abandoned: exiting
        # normally would wait for each of them
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    # The command is done: what is garbage now is collected once (a store's connection, closed
    # and checkpointed), and what is left is frozen, so the interpreter's exit frees it without
    # traversing it all again (a tenth of the CPU of a 1,000-case run; docs/http.md)
    gc.collect()
    gc.freeze()
    sys.exit(code)
