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
@click.argument("directory", type=click.Path(file_okay=False))
def init(example: str | None, template: str | None, directory: str) -> None:
    """Copy a bundled example, or a blank template for your own system, into DIRECTORY."""
    import shutil
    from importlib.resources import as_file, files

    if (example is None) == (template is None):
        raise click.UsageError("give either --example NAME or --template callable|http|rag")
    root = files("oloproof_examples")
    if template is not None:
        root, example = root / "templates", template
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "oloproof.yaml").is_file())
    if example not in names:
        raise OloproofError(f"no example {example!r}", fix=f"use one of: {', '.join(names)}")
    target = Path(directory)
    if target.exists() and any(target.iterdir()):
        raise OloproofError(f"{directory} already exists and is not empty", fix="choose a new directory")
    with as_file(root / example) as source:
        shutil.copytree(source, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", ".oloproof", "*.pyc"))
    if template is not None:
        first = "python server.py & oloproof run" if template == "http" else "oloproof run"
        click.echo(f"Created {directory} from the blank {template} template. Edit "
                   f"{'oloproof.yaml' if template == 'http' else 'app.py'} and cases.jsonl, then: "
                   f"cd {directory} && {first}")
        return
    click.echo(f"Created {directory} from the {example} example. Next: cd {directory} && oloproof run")


def oloproof_register_commands(cli) -> None:
    cli.add_command(init)
