"""What a CI system and a reviewer read: a run or a comparison as JUnit XML, JSON and Markdown.

``view.py`` builds one plain, versioned dict of the results; each renderer reads only that dict.
The JSON document is the dict itself, described by ``results-v1.schema.json`` (shipped beside
this module). See docs/gates-in-ci.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

SCHEMA_FILE = "results-v1.schema.json"


def schema() -> dict:
    """The JSON Schema of the ``--json`` documents (a run and a comparison)."""
    from importlib.resources import files  # only here: every command imports this package

    return json.loads(files(__name__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def to_json(view: Mapping[str, Any]) -> str:
    return json.dumps(view, indent=2, ensure_ascii=False) + "\n"


def to_json_chunks(view: Mapping[str, Any], key: str, items: Iterable[Any]) -> Iterator[str]:
    """``to_json({**view, key: list(items)})`` in pieces, ``items`` read one at a time: a list as
    long as a run is never held (``key`` is the document's last key)."""
    tail = f"  {json.dumps(key, ensure_ascii=False)}: []\n}}\n"
    yield to_json({**view, key: []}).removesuffix(tail) + tail[:-4]
    first = True
    for item in items:
        text = json.dumps(item, indent=2, ensure_ascii=False)
        yield ("\n" if first else ",\n") + "\n".join("    " + line for line in text.split("\n"))
        first = False
    yield ("]" if first else "\n  ]") + "\n}\n"


def _write(path: str, text: str | Iterable[str]) -> None:
    """Write ``text``, or its pieces one after another."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as handle:
        handle.writelines([text] if isinstance(text, str) else text)


def write_outputs(view: Mapping[str, Any], *, junit: str | None = None, json_file: str | None = None,
                  markdown: str | None = None, records: Iterable[Mapping[str, Any]] | None = None) -> None:
    """Write the files asked for; append the Markdown summary to ``$GITHUB_STEP_SUMMARY`` when set.

    :param records: a run's case records, for a JUnit test case a case x criterion (``--junit-cases``).
    """
    from ..errors import OloproofError

    try:
        if junit:
            from .junit import junit_chunks

            _write(junit, junit_chunks(view, records))
        if json_file:
            _write(json_file, to_json(view))
        summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
        if markdown or summary_file:
            from .markdown import render_markdown

            text = render_markdown(view)
            if markdown:
                _write(markdown, text)
            if summary_file:
                with open(summary_file, "a", encoding="utf-8") as handle:
                    handle.write(text + "\n")
    except OSError as exc:
        raise OloproofError(f"cannot write {exc.filename}: {exc.strerror}",
                            fix="choose a file in a directory you can write to") from None
