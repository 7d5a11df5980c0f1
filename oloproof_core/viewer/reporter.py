"""The ``html`` reporter: one self-contained HTML file of a run (its page, then every case's) or of
a stored comparison or diagnosis, the viewer's pages without a server (``oloproof export --html``,
``--report html=FILE``). Registered through ``oloproof_register_reporters`` like any reporter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oloproof_core.config.files import write_file
from oloproof_core.hooks.specs import hookimpl


class HtmlReporter:
    """Renders from the store (``context``), which holds every case's page; the view is not needed."""

    def write(self, view: Any, target: str, *, records: Any = None, context: Any = None) -> None:
        from oloproof_core.viewer.server import export_html

        path = Path(target).resolve()
        write_file(path.parent, path.name, [export_html(context.store, context.plugins, context.subject)])


@hookimpl
def oloproof_register_reporters(registry: Any) -> None:
    registry.add("html", lambda options: HtmlReporter())
