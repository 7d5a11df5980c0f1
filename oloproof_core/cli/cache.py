"""`oloproof cache`: the caches' sizes, and clearing them."""

from __future__ import annotations


import click

from oloproof_core.cli.common import config_option, echo, store_option
from oloproof_core.model.errors import OloproofError
from oloproof_core.workflows.project import Project


CACHE_NAMESPACES = ("execution", "judgment", "stage:retrieve", "stage:generate")


@click.group(invoke_without_command=True)
@config_option
@store_option
@click.pass_context
def cache(ctx: click.Context, config: str | None, store_spec: str | None) -> None:
    """What the caches hold, per namespace; `oloproof cache clear NAMESPACE` empties one.

    Entries never go stale: a cache key covers the code and settings a result came from, so a
    change misses the cache by itself. Clearing only frees space, or forces an opaque system's
    reused executions to be sent again.
    """
    ctx.ensure_object(dict).update(config=config, store=store_spec)
    if ctx.invoked_subcommand is not None:
        return
    from oloproof_core.statistics.display import table

    store = Project(config, store_spec, existing=True).reader()
    stats = getattr(store, "cache_stats", None)
    if stats is None:
        raise OloproofError(f"the store {type(store).__name__} cannot list its caches", fix="use the local store")
    rows = {ns: (count, size) for ns, count, size in stats()}
    names = list(CACHE_NAMESPACES) + sorted(set(rows) - set(CACHE_NAMESPACES))
    echo(table(["namespace", "entries", "size"],
                [[ns, f"{rows.get(ns, (0, 0))[0]:,}", _size(rows.get(ns, (0, 0))[1])] for ns in names]))


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:,} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1024
    return str(count)


@cache.command("clear")
@click.argument("namespaces", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Clear every namespace (stored runs are kept).")
@click.pass_context
def cache_clear(ctx: click.Context, namespaces: tuple[str, ...], everything: bool) -> None:
    """Empty the cache NAMESPACES (execution, judgment, stage:retrieve, stage:generate)."""
    store = Project(ctx.obj.get("config"), ctx.obj.get("store"), existing=True).store
    if getattr(store, "cache_clear", None) is None:
        raise OloproofError(f"the store {type(store).__name__} cannot clear its caches",
                            fix="use a store that implements cache_clear (local, postgres)")
    stats = getattr(store, "cache_stats", None)  # optional: without it, the builtin namespaces are known
    known = {ns for ns, _, _ in (stats() if stats is not None else ())} | set(CACHE_NAMESPACES)
    if everything:
        namespaces = tuple(sorted(known))
    if not namespaces:
        raise OloproofError("name the namespaces to clear", fix="e.g. `oloproof cache clear execution`, or --all")
    for ns in namespaces:
        if ns not in known:
            raise OloproofError(f"no cache namespace {ns!r}", fix=f"use one of: {', '.join(CACHE_NAMESPACES)}")
    for ns in namespaces:
        click.echo(f"Cleared {ns}: {store.cache_clear(ns):,} entries")


def oloproof_register_commands(cli) -> None:
    cli.add_command(cache)
