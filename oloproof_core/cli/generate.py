"""`oloproof generate`: a cases file from a corpus of passages (docs/suite-without-labels.md)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from oloproof_core.cli.common import config_option, echo


def pairs(values: tuple[str, ...], flag: str) -> dict:
    """``KEY=VALUE`` options, each value read as a YAML scalar (``0.15`` a number, ``null`` None)."""
    from ruamel.yaml import YAML

    from oloproof_core.model.errors import ConfigError

    out = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key:
            raise ConfigError(f"{value!r} is not KEY=VALUE", where=flag, fix=f"write e.g. {flag} file=replies.jsonl")
        out[key] = YAML(typ="safe").load(text) if text else ""
    return out


@click.command()
@click.option("--corpus", default=None, metavar="FILE",
              help="Passages, JSONL {doc_id, chunk_id?, text}; without it, the index of the suite's system.rag "
                   "(its passages()).")
@click.option("--output", "-o", default="cases.generated.jsonl", show_default=True, metavar="FILE",
              help="The cases file to write (JSONL).")
@click.option("--count", type=click.IntRange(min=1), default=20, show_default=True, help="Cases to ask for.")
@click.option("--mix", default=None, metavar="KIND=SHARE,...",
              help="The share of each question kind: factoid, two_passage, paraphrased, unanswerable "
                   "[default: factoid=0.4,two_passage=0.2,paraphrased=0.2,unanswerable=0.2].")
@click.option("--generator", "generator_name", default="llm_generator", show_default=True, metavar="NAME",
              help="The generator plugin.")
@click.option("--provider", default=None, metavar="NAME", help="The provider the generator asks (openai, replay, ...).")
@click.option("--model", default=None, metavar="NAME", help="The model the generator asks.")
@click.option("--provider-option", "provider_options", multiple=True, metavar="KEY=VALUE",
              help="An option of the provider (base_url, api_key_env, file, prices; repeatable).")
@click.option("--option", "extra", multiple=True, metavar="KEY=VALUE", help="An option of the generator (repeatable).")
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True,
              help="Requests in flight at once.")
@click.option("--seed", type=int, default=0, show_default=True, help="Which passages each kind is asked about.")
@click.option("--duplicate-threshold", type=click.FloatRange(0, 1), default=0.6, show_default=True,
              help="Drop a question whose word-bigram overlap (Jaccard) with an earlier one is at least this.")
@click.option("--question-field", default="question", show_default=True, help="The key of the case input.")
@click.option("--abstention", default="I don't know.", show_default=True,
              help="The expected answer of an unanswerable question.")
@click.option("--dry-run", is_flag=True, help="Print the plan and the cost estimate; ask nothing.")
@config_option
def generate(corpus: str | None, output: str, count: int, mix: str | None, generator_name: str,
             provider: str | None, model: str | None, provider_options: tuple[str, ...], extra: tuple[str, ...],
             concurrency: int, seed: int, duplicate_threshold: float, question_field: str, abstention: str, dry_run: bool,
             config: str | None) -> None:
    """Write cases generated from a corpus: each case's question, its reference answer, its source
    passages as expected.relevant (grade 2) and gold_context, and metadata.synthetic naming the
    generator. The cost estimate is printed before anything is asked; work resumes after an interrupt."""
    from oloproof_core.config.documents import structure
    from oloproof_core.model.errors import ConfigError
    from oloproof_core.workflows import generation
    from oloproof_core.workflows.project import Project

    project = Project(config)
    entry = project.plugins.generators.get(generator_name, where="--generator")
    data = {**({"provider": provider} if provider else {}), **({"model": model} if model else {}),
            **({"provider_options": pairs(provider_options, "--provider-option")} if provider_options else {}),
            **pairs(extra, "--option")}
    try:
        options = (structure(None, data, entry.options, (), what=f"generator {generator_name!r} from {entry.distribution}")
                   if entry.options is not None else None)
        made = entry.factory(options)
    except ConfigError as exc:
        flag = flag_of(exc.where) if exc.where else "--provider-option"  # a provider's own check names no key
        fix = f"give {flag} NAME" if flag in ("--provider", "--model") and "missing" in exc.problem else exc.fix
        raise ConfigError(exc.problem, where=flag, fix=fix) from None
    if corpus is not None:
        passages, source = generation.read_corpus(corpus), corpus
    else:
        passages, source = generation.index_passages(system_of(project)), "the system's index"
    shares = generation.parse_mix(mix, made.kinds)
    requests = generation.plan(passages, count, shares, seed)
    cost = generation.estimate(made, requests)
    priced = "unpriced (no prices in the provider options)" if cost["cost"] is None else f"${cost['cost']:.4f}"
    kinds = generation.allocate(count, shares)
    echo([f"Plan: {count} cases from {len(passages)} passages of {source} (seed {seed}): "
          + ", ".join(f"{n} {kind}" for kind, n in kinds.items()),
          f"Estimate: at most {cost['calls']} calls, about {cost['input_tokens']} input and {cost['output_tokens']} "
          f"output tokens, {priced}"])
    if dry_run:
        echo(["Dry run: nothing asked."])
        return
    tty = click.get_text_stream("stderr").isatty()
    lead = "\r" if tty else ""  # a terminal sees one line rewritten; a log a line every ten requests

    def progress(done: int, total: int, dropped: int, spent: dict) -> None:
        if tty or done == total or done % 10 == 0:
            resumed = f" ({spent['resumed']} done before)" if spent["resumed"] else ""
            click.echo(f"{lead}Generating: {done}/{total} requests{resumed}, {dropped} dropped, "
                       f"{spent['calls']} calls made", err=True, nl=not tty or done == total)

    cases, figures = generation.generate_cases(
        made, generator_name, passages, count=count, mix=shares, seed=seed,
        progress_dir=project.dir / ".oloproof" / "generate", duplicate_threshold=duplicate_threshold,
        question_field=question_field, abstention=abstention, progress=progress, concurrency=concurrency)
    if not cases:
        raise ConfigError("no case survived the filters", where="--output",
                          fix="read the dropped counts above; try another --seed, a larger --count or another model")
    temporary = Path(output + ".partial")
    import json

    temporary.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8")
    os.replace(temporary, output)
    share = figures["kinds"].get("unanswerable", 0) / len(cases)
    echo([f"Wrote {len(cases)} cases to {output}: " + ", ".join(f"{n} {k}" for k, n in figures["kinds"].items())
          + f" ({share:.0%} unanswerable, asked {shares.get('unanswerable', 0):.0%})",
          f"Dropped: {figures['answer_not_supported']} answer not supported by its passages (judged by "
          f"{made.identity.get('model', generator_name)}), {figures['near_duplicate']} near-duplicate question, "
          f"{figures['generator_error']} unusable reply; {figures['trimmed']} trimmed to keep the mix",
          f"Next: name {output} under cases: in oloproof.yaml, then oloproof run"])


def flag_of(where: str | None) -> str | None:
    """The command-line flag behind a generator option's YAML path (``$.provider`` -> ``--provider``)."""
    key = (where or "").removeprefix("$.").removeprefix("$")
    if key in ("provider", "model"):
        return f"--{key}"
    if key == "provider_options":
        return "--provider-option"
    if key.startswith("provider_options."):
        return "--provider-option " + key.removeprefix("provider_options.")
    return f"--option {key}" if key else "--option"


def system_of(project):
    """The suite's system, built as a run builds it (for its index)."""
    import sys

    from oloproof_core.engine.system import load_system

    doc, skeleton = project.skeleton()
    if str(project.dir) not in sys.path:  # as a run does: `object: app:Rag` finds app.py in the project
        sys.path.append(str(project.dir))
    return load_system(doc, skeleton.system, project.plugins, project.dir)[0]


def oloproof_register_commands(cli) -> None:
    cli.add_command(generate)
