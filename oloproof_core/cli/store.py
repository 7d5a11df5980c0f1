"""`oloproof store`: create, migrate, copy, check, repair and sign a store."""

from __future__ import annotations

import sys

import click

from oloproof_core.cli.common import config_option, echo, store_option
from oloproof_core.model.errors import ExitCode, OloproofError
from oloproof_core.workflows.project import Project


@click.group()
def store() -> None:
    """Create, migrate, check, repair, sign and copy the project's store."""


@store.command("init")
@config_option
@store_option
def store_init(config: str | None, store_spec: str | None) -> None:
    """Create the store's tables (a database store; the local store makes itself on first use)."""
    _schema_step(Project(config, store_spec).store, "init")


@store.command()
@config_option
@store_option
def migrate(config: str | None, store_spec: str | None) -> None:
    """Bring the store's tables to the version this oloproof needs (never done by a run)."""
    _schema_step(Project(config, store_spec).store, "migrate")


def _schema_step(store, step: str) -> None:
    action = getattr(store, step, None)
    if action is None:
        click.echo(f"Store {getattr(store, 'shown', type(store).__name__)}: nothing to {step}; "
                   "it keeps its own schema")
        return
    click.echo(action())


@store.command()
@click.option("--from", "source", metavar="STORE", default=None,
              help="The store to copy from (default: the project's store, as for every command).")
@click.option("--to", "target", metavar="STORE", required=True,
              help="The store to copy to: local, a postgresql:// URL, or {type: ..., ...}.")
@config_option
def copy(source: str | None, target: str, config: str | None) -> None:
    """Copy the runs and objects (comparisons, diagnoses, validations) the target lacks; copying
    again copies nothing. Caches are not copied."""
    from oloproof_core.storage.stores import copy_runs

    origin = Project(config, source).reader()
    counts = copy_runs(origin, Project(config, target).store)
    there = counts["runs_there"] + counts["objects_there"]
    click.echo(f"Copied {counts['runs']} runs and {counts['objects']} objects"
               + (f" ({counts['runs_there']} runs and {counts['objects_there']} objects were there already)" if there else ""))


@store.command()
@config_option
@store_option
def check(config: str | None, store_spec: str | None) -> None:
    """Verify the whole store: every run against its seal, every cache value and object against
    its checksum, and the database file itself. Exit 0 when nothing is damaged, 2 otherwise."""
    store = Project(config, store_spec, existing=True).reader()
    checker = getattr(store, "check", None)
    if checker is None:
        raise OloproofError("this store cannot check itself", fix="use the local store")
    found = checker()
    counts = found.get("counts") if isinstance(found, dict) else None
    if not isinstance(counts, dict) or not isinstance(found.get("problems"), list):
        raise OloproofError(f"the store {type(store).__name__}'s check() returned no counts and problems",
                            fix="fix the store plugin: check() returns {store, counts, problems} (docs/stores.md)")
    counts = {"runs": 0, "cases": 0, "cache": 0, "objects": 0, "unverified": 0, **counts}
    found.setdefault("store", getattr(store, "shown", type(store).__name__))

    def n(count: int, noun: str) -> str:
        return f"{count} {noun}" + ("" if count == 1 else "s")

    lines = [f"Store {found['store']}: {n(counts['runs'], 'run')} ({n(counts['cases'], 'case record')}), "
             f"{n(counts['cache'], 'cached value')}, {n(counts['objects'], 'object')}"]
    if counts["unverified"]:
        lines.append(f"Unverified: {counts['unverified']}, stored before checksums existed"
                     + (" or signed with a store key this command does not have" if not getattr(store, "key", None) else ""))
    if counts.get("quarantined"):
        lines.append(f"Quarantined: {n(counts['quarantined'], 'run')} set aside by `oloproof store repair` "
                     "(listed by no command)")
    if counts.get("unfinished"):  # not damage: a run whose process ended before it finished
        rows = sum(u["cases"] for u in found.get("unfinished", ()))
        lines.append(f"Unfinished: {n(counts['unfinished'], 'run')} begun and not finished ({n(rows, 'case record')}, "
                     "seen by no command); the next run begun in this store removes those whose process has ended")
    lines += [f"Damaged: {problem}" for problem in found["problems"]]
    lines.append(f"{len(found['problems'])} damaged; `oloproof store repair` removes the damaged cached values and "
                 "quarantines the damaged runs" if found["problems"] else "No damage found")
    echo(lines)
    sys.exit(int(ExitCode.USAGE if found["problems"] else ExitCode.OK))


@store.command()
@config_option
@store_option
def repair(config: str | None, store_spec: str | None) -> None:
    """Remove the damaged cached values (a run recomputes them), quarantine the damaged runs
    (renamed quarantined:RUN_ID, listed by no command) and remove case records without their run.
    Exit 0 when nothing damaged is left, 2 otherwise."""
    store = Project(config, store_spec, existing=True).store
    fixer = getattr(store, "repair", None)
    if fixer is None:
        raise OloproofError("this store cannot repair itself", fix="use the local or postgres store")
    done = fixer()
    left = done["after"]["problems"]
    lines = [f"Store {done['store']}: removed {done['cache']} damaged cached value" + ("" if done["cache"] == 1 else "s")
             + f", quarantined {len(done['runs'])} damaged run" + ("" if len(done["runs"]) == 1 else "s")
             + (f", removed the case records of {done['orphans']} runs without their run" if done["orphans"] else "")]
    from oloproof_core.storage.runs import shown_text

    lines += [f"Quarantined: {shown_text(run_id)}" for run_id in done["runs"]]
    lines += [f"Still damaged: {problem}" for problem in left]
    lines.append(f"{len(left)} damaged" if left else "No damage left")
    echo(lines)
    sys.exit(int(ExitCode.USAGE if left else ExitCode.OK))


@store.command()
@config_option
@store_option
def sign(config: str | None, store_spec: str | None) -> None:
    """Sign the rows stored before the store key was set (OLOPROOF_STORE_KEY or .oloproof/key)
    with it, so that adopting a key keeps the runs and cached values already stored. Refused
    unless `store check` with the key finds nothing but unsigned rows. Exit 0 when done."""
    store = Project(config, store_spec, existing=True).store
    signer = getattr(store, "sign", None)
    if signer is None:
        raise OloproofError("this store cannot sign its rows with a store key", fix="use the local or postgres store")
    done = signer()

    def n(count: int, noun: str) -> str:
        return f"{count} {noun}" + ("" if count == 1 else "s")

    after = done["after"]
    lines = [f"Store {done['store']}: signed {n(done['runs'], 'run')}, {n(done['cache'], 'cached value')} and "
             f"{n(done['objects'], 'object')} with the store key"]
    if after["counts"].get("unverified"):
        lines.append(f"Unverified: {after['counts']['unverified']}, stored before checksums existed (left as they were)")
    lines += [f"Still damaged: {problem}" for problem in after["problems"]]
    lines.append(f"{len(after['problems'])} damaged" if after["problems"] else "No damage found")
    echo(lines)
    sys.exit(int(ExitCode.USAGE if after["problems"] else ExitCode.OK))


def oloproof_register_commands(cli) -> None:
    cli.add_command(store)
