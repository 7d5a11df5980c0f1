"""The builtin file reporters, registered through ``oloproof_register_reporters`` as a third
party's would be: ``junit`` (JUnit XML), ``json`` (the results document) and ``markdown`` (a
pull-request summary, appended to ``$GITHUB_STEP_SUMMARY`` whenever that is set)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from oloproof_core.hooks.specs import hookimpl
from oloproof_core.outputs import to_json, write_text


class JunitReporter:
    """One test case a policy rule; with records, also one a case x criterion (``--junit-cases``)."""

    def write(self, view: Mapping[str, Any], target: str, *, records: Iterable[Mapping[str, Any]] | None = None,
              context: Any = None) -> None:
        from oloproof_core.outputs.junit import junit_chunks

        write_text(target, junit_chunks(view, records))


class JsonReporter:
    """The versioned results document (``results-v1.schema.json``)."""

    def write(self, view: Mapping[str, Any], target: str, *, records: Any = None, context: Any = None) -> None:
        write_text(target, to_json(view))


class MarkdownReporter:
    """A Markdown summary; ``target`` None writes only the step summary of GitHub Actions."""

    def write(self, view: Mapping[str, Any], target: str | None, *, records: Any = None, context: Any = None) -> None:
        from oloproof_core.outputs.markdown import render_markdown

        text = render_markdown(view)
        if target:
            write_text(target, text)
        summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary_file:
            with open(summary_file, "a", encoding="utf-8") as handle:
                handle.write(text + "\n")


@hookimpl
def oloproof_register_reporters(registry: Any) -> None:
    registry.add("junit", lambda options: JunitReporter())
    registry.add("json", lambda options: JsonReporter())
    registry.add("markdown", lambda options: MarkdownReporter())
