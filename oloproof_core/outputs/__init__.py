"""What a CI system and a reviewer read: a run or a comparison as JUnit XML, JSON and Markdown.

``view.py`` builds one plain, versioned dict of the results; each renderer reads only that dict.
The JSON document is the dict itself, described by ``results-v1.schema.json`` (shipped beside
this module). See docs/gates-in-ci.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

SCHEMA_FILE = "results-v1.schema.json"


def schema() -> dict:
    """The JSON Schema of the ``--json`` documents (a run and a comparison)."""
    import json
    from importlib.resources import files  # here, as json in each function: every command imports this package

    return json.loads(files(__name__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def to_json(view: Mapping[str, Any]) -> str:
    import json

    return json.dumps(view, indent=2, ensure_ascii=False) + "\n"


def to_json_chunks(view: Mapping[str, Any], key: str, items: Iterable[Any]) -> Iterator[str]:
    """``to_json({**view, key: list(items)})`` in pieces, ``items`` read one at a time: a list as
    long as a run is never held (``key`` is the document's last key)."""
    import json

    tail = f"  {json.dumps(key, ensure_ascii=False)}: []\n}}\n"
    yield to_json({**view, key: []}).removesuffix(tail) + tail[:-4]
    first = True
    for item in items:
        text = json.dumps(item, indent=2, ensure_ascii=False)
        yield ("\n" if first else ",\n") + "\n".join("    " + line for line in text.split("\n"))
        first = False
    yield ("]" if first else "\n  ]") + "\n}\n"


def write_text(path: str, text: str | Iterable[str]) -> None:
    """Write ``text``, or its pieces one after another, creating the file's folder; only to a
    regular file (config/files.py: a device or a FIFO is refused)."""
    from oloproof_core.config.files import regular_target

    regular_target(path)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as handle:
        handle.writelines([text] if isinstance(text, str) else text)


class ReportContext:
    """What a reporter may read beyond the view: the store, the plugins, and the run id or
    ``sha256:`` object id the view reports (``subject``)."""

    def __init__(self, store: Any, plugins: Any, subject: str):
        self.store, self.plugins, self.subject = store, plugins, subject


def check_reports(plugins: Any, reports: Sequence[tuple[str, str | None, bool]]) -> None:
    """Stop before any work when a reporter asked for is not registered (one line, exit 2)."""
    for name, _, _ in reports:
        plugins.reporters.get(name, where="--report")


def write_reports(plugins: Any, view: Mapping[str, Any], reports: Sequence[tuple[str, str | None, bool]], *,
                  records: Callable[[], Iterable[Mapping[str, Any]]] | None = None,
                  context: ReportContext | None = None) -> None:
    """Write each ``(reporter name, target, gets records)`` of ``reports`` (``options.wanted_reports``), in order.

    :param records: called once per reporter that gets the case records (``junit`` with
        ``--junit-cases``, every reporter of ``--report``): a long run is streamed each time, never held.
    """
    from oloproof_core.model.errors import OloproofError

    for name, target, with_records in reports:
        reporter = plugins.reporters.get(name, where="--report").factory(None)
        try:
            reporter.write(view, target, records=records() if with_records and records else None, context=context)
        except OSError as exc:
            raise OloproofError(f"cannot write {exc.filename or target}: {exc.strerror}",
                                fix="choose a file in a directory you can write to") from None
