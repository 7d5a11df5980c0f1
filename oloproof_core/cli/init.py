"""`oloproof init`: a new project from a bundled example or a blank template."""

from __future__ import annotations

from pathlib import Path

import click

from oloproof_core.model.errors import OloproofError


TEMPLATES = ("callable", "http", "rag")


@click.command()
@click.option("--example", "example", default=None, metavar="NAME", help="The bundled example to copy.")
@click.option("--template", "template", default=None, type=click.Choice(TEMPLATES),
              help="A blank project for your own system: a function, a service, or a staged RAG class.")
@click.option("--here", is_flag=True,
              help="Add the project to the current directory, beside the files already in it (none is replaced).")
@click.argument("directory", type=click.Path(file_okay=False), required=False)
def init(example: str | None, template: str | None, here: bool, directory: str | None) -> None:
    """Copy a bundled example, or a blank template for your own system, into DIRECTORY (a new or
    empty one), or with --here into the current directory, beside your own files."""
    import shutil
    from importlib.resources import as_file, files

    if (example is None) == (template is None):
        raise click.UsageError("give either --example NAME or --template callable|http|rag")
    if here == (directory is not None):
        raise click.UsageError("give either DIRECTORY (a new one) or --here (the current directory)")
    root = files("oloproof_examples")
    if template is not None:
        root, example = root / "templates", template
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "oloproof.yaml").is_file())
    if example not in names:
        raise OloproofError(f"no example {example!r}", fix=f"use one of: {', '.join(names)}")
    what = f"--template {template}" if template is not None else f"--example {example}"
    target = Path(directory or ".")
    with as_file(root / example) as source:
        ignore = shutil.ignore_patterns("__pycache__", ".oloproof", "*.pyc")
        if here:
            clashes = sorted(str(p.relative_to(source)) for p in source.rglob("*") if p.is_file()
                             and not ignore(str(p.parent), [p.name]) and (target / p.relative_to(source)).exists())
            if clashes:
                raise OloproofError(f"the current directory already has {', '.join(clashes)}, which the project "
                                    "would replace", fix="move or rename them, or give a new DIRECTORY instead of --here")
        elif target.exists() and any(target.iterdir()):
            raise OloproofError(f"{directory} already exists and is not empty",
                                fix=f"choose a new directory, or add the project beside your files: "
                                    f"cd {directory} && oloproof init {what} --here")
        shutil.copytree(source, target, dirs_exist_ok=True, ignore=ignore)
    made = "Added to the current directory" if here else f"Created {directory}"
    cd = "" if here else f"cd {directory} && "
    if template == "http":  # two commands, each pasted on its own: the service keeps its terminal
        click.echo(f"{made} from the blank http template. Edit oloproof.yaml and cases.jsonl, then "
                   f"start the service in one terminal and run in another:\n"
                   f"  {cd}python server.py\n  {cd}oloproof run")
        return
    if template is not None:
        click.echo(f"{made} from the blank {template} template. Edit app.py and cases.jsonl, then: "
                   f"{cd}oloproof run")
        return
    click.echo(f"{made} from the {example} example. Next: {cd}oloproof run")


def oloproof_register_commands(cli) -> None:
    cli.add_command(init)
