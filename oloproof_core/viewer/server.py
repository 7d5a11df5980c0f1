"""``oloproof view``: a local, read-only web viewer of a project's store, and the HTML export.

The pages are Jinja2 templates (autoescaped: everything a case holds is untrusted text) rendered
from the view models of :mod:`oloproof_core.views`, served by aiohttp on 127.0.0.1. Every handler
is a GET that only reads; the pages use no JavaScript, and a Content-Security-Policy forbids any
script, remote resource or form target off the viewer. A middleware answers only the Host names
the viewer was started for (:mod:`oloproof_core.viewer.guard`), and a page the store fails is a
500 page and one line on stderr. ``export_html`` renders the same pages into one self-contained
file.
"""

from __future__ import annotations

import threading
from typing import Any

from oloproof_core.outputs import pages as views
from oloproof_core.viewer.links import ExportLinks, ServedLinks
from oloproof_core.model.errors import ConfigError

META_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'"
CSP = META_CSP + "; frame-ancestors 'none'"  # frame-ancestors only counts as a header
WHOLE = 20_000  # a run of up to this many cases is read at once for its page (slices, failures)
KEPT_VIEWS = 16  # run pages' data kept (a few KB each: never a run's records)


def environment() -> Any:
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("oloproof_core.viewer", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["pretty"] = pretty
    env.filters["num"] = num
    env.globals["link"] = link
    env.globals["status_of"] = views.status_of
    env.globals["statuses"] = views.STATUSES
    return env


def pretty(value: Any) -> str:
    """Indented JSON as the reader would write it; the template's autoescaping makes it inert."""
    import json

    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def num(value: Any, places: int = 3) -> str:
    """A recorded number for reading: a float to ``places`` decimals (``0.631``), an integer as
    it is, anything else (None, text) as text or nothing."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, float):
        from oloproof_core.statistics.display import fixed

        return fixed(value, places) if value == value and abs(value) != float("inf") else str(value)
    return str(value)


def link(href: str | None, text: Any) -> Any:
    """``<a href>text</a>``, or the text alone (marked as not in this file) when a page has no
    URL for it: an exported file links only to what it holds."""
    from markupsafe import Markup, escape

    if href is None:
        return Markup('<span class="elsewhere" title="not in this file">{}</span>').format(escape(text))
    return Markup('<a href="{}">{}</a>').format(href, escape(text))


class Pages:
    """Renders each page from the store; one instance per viewer process."""

    def __init__(self, store: Any, plugins: Any):
        self.store, self.plugins = store, plugins
        self.records = views.Records(store)
        self.views: dict[str, dict] = {}  # run id -> its page's data (KEPT_VIEWS at most)
        self.env = environment()

    def render(self, template: str, links: Any, **context: Any) -> str:
        return self.env.get_template(template).render(links=links, exported=False, **context)

    def runs(self, query: dict, links: Any) -> str:
        from oloproof_core.outputs import browse

        view = browse.runs_view(self.store, query.get("system"), query.get("state"), query.get("gate"),
                               every=bool(query.get("all")))
        objects = []
        for kind in ("comparison", "diagnosis", "headroom", "judge_validation"):
            for object_id, record in self.store.list_objects(kind):
                about = (f"{record.get('candidate')} against {record.get('baseline')}" if kind == "comparison"
                         else record.get("run") or record.get("criterion") or "")
                objects.append({"kind": kind, "id": object_id, "about": about})
        return self.render("runs.html", links, view=view, objects=objects)

    def run(self, run_id: str, query: dict, links: Any) -> str:
        run_id = self.store.resolve_run(run_id)
        view = self.run_page(run_id)
        try:
            page = int(query.get("page") or 1)
        except ValueError:
            page = 1
        status = query.get("status") if query.get("status") in views.STATUSES else None
        criterion = query.get("criterion") if query.get("criterion") in view["criteria"] else None
        sort = query.get("sort") if query.get("sort") in ("case", *view["criteria"]) else None
        q = (query.get("q") or "").strip()
        cases = views.cases_page(self.store, run_id, view["criteria"], page, criterion, status, q, sort=sort,
                                 desc=bool(query.get("desc")), conversation=(query.get("conversation") or "").strip())
        return self.render("run.html", links, view=view, cases=cases)

    def run_page(self, run_id: str) -> dict:
        """The run's page data, computed once per run; its child runs, which a diagnosis may add
        while the viewer runs, are listed on each request. A run of up to ``WHOLE`` cases is read
        at once for it (slices, failures); a larger one's page is served at once from its summary
        while one background pass counts its missing cases and finds its failures (through the
        store's index), and the page says so until that pass is done."""
        view = self.views.get(run_id)
        if view is None:
            header, _ = self.store.get_run(run_id)
            if (header.get("cases") or 0) <= WHOLE:
                view = self.whole_view(run_id, list(self.store.run_cases(run_id)))
            else:
                view = {**views.run_view(self.store, self.plugins, run_id, read=False), "pending": True,
                        "failures": None}
                threading.Thread(target=self.read_large, args=(run_id, view), daemon=True).start()
            self.keep(run_id, view)
        return {**view, "children": [h for h in self.store.list_runs() if h.get("parent") == run_id]}

    def keep(self, run_id: str, view: dict) -> None:
        self.views[run_id] = view
        while len(self.views) > KEPT_VIEWS:
            self.views.pop(next(iter(self.views)))

    def whole_view(self, run_id: str, records: list[dict] | None) -> dict:
        from oloproof_core.outputs import browse

        view = views.run_view(self.store, self.plugins, run_id, records)
        gated = browse.gating_criteria(view["document"], view["criteria"])
        if records is not None:  # read already: no index needed for the first page
            failures = browse.failures(records, gated)
        else:
            found = views.query_cases(self.store, run_id, failing=gated, limit=browse.FAILURES_SHOWN)
            failures = {**browse.failures(found["records"], gated), "count": found["matching"]}
        return {**view, "failures": failures, "pending": False}

    def read_large(self, run_id: str, quick: dict) -> None:
        """The background pass of a large run's page (see ``run_page``)."""
        try:
            self.keep(run_id, self.whole_view(run_id, None))
        except Exception as exc:  # noqa: BLE001 - the page says it, and the terminal has the line
            from oloproof_core.model.errors import error_line

            self.keep(run_id, {**quick, "pending": False, "problem": error_line(exc)[0]})

    def compare(self, query: Any, links: Any) -> str:
        """Two runs side by side (``?run=A&run=B``, the newer the candidate): the runs list's form."""
        from oloproof_core.outputs import browse

        chosen = list(dict.fromkeys(query.getall("run", []) if hasattr(query, "getall") else query.get("run", [])))
        if len(chosen) != 2:
            raise ConfigError(f"compare needs two runs, {len(chosen)} chosen",
                              fix="tick two runs on the runs page, then press Compare")
        ids = sorted(self.store.resolve_run(r) for r in chosen)  # run ids sort by creation time
        baseline, candidate = ids
        show = query.get("show") if query.get("show") in browse.CHANGES else None
        view = browse.pair_view(self.store, self.records, candidate, baseline, show)
        return self.render("compare.html", links, v=view)

    def suite(self, query: dict, links: Any) -> str:
        """Each metric across the runs of one suite (``?system=NAME&config=FILE``): the runs list links it."""
        from oloproof_core.outputs.suite import suite_view

        return self.render("suite.html", links, v=suite_view(self.store, query.get("system") or "", query.get("config")))

    def case(self, run_id: str, case_id: str, links: Any) -> str:
        run_id = self.store.resolve_run(run_id)
        return self.render("case.html", links, c=views.case_view(self.store, self.records, run_id, case_id))

    def object(self, object_id: str, links: Any) -> str:
        return self.render("object.html", links, o=views.object_view(self.store, self.records, object_id))


class ReadRun:
    """A store whose case lookups in one run are answered from that run's records, read once by
    the export (a conversation's turn looks up its other turns); the rest is the store's."""

    def __init__(self, store: Any, run_id: str, records: list[dict]):
        self.store, self.run_id, self.by_id = store, run_id, {r["id"]: r for r in records}

    def run_case(self, run_id: str, case_id: str) -> dict | None:
        if run_id == self.run_id:
            return self.by_id.get(case_id)
        return next((r for r in self.store.run_cases(run_id) if r["id"] == case_id), None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def export_html(store: Any, plugins: Any, target: str) -> str:
    """One self-contained HTML file for a run (its page, every case's page after it), or for a
    stored comparison or diagnosis (``sha256:...``)."""
    pages = Pages(store, plugins)
    if target.startswith("sha256:"):
        view = views.object_view(store, pages.records, target)
        html = pages.env.get_template("object.html").render(links=ExportLinks(set()), exported=True, o=view)
    else:
        run_id = store.resolve_run(target)
        records = list(store.run_cases(run_id))
        view = {**pages.whole_view(run_id, records),
                "children": [h for h in store.list_runs() if h.get("parent") == run_id]}
        cases = views.cases_view(records, view["criteria"], per_page=max(1, len(records)))
        read = ReadRun(store, run_id, records)  # each case's page, its transcript too, from the records read
        bodies = [views.case_view(read, pages.records, run_id, r["id"]) for r in records]
        html = pages.env.get_template("run.html").render(links=ExportLinks({run_id}), exported=True, view=view,
                                                         cases=cases, exported_cases=bodies)
    meta = f'<meta http-equiv="Content-Security-Policy" content="{META_CSP}">'
    return html.replace('<meta charset="utf-8">', '<meta charset="utf-8">\n' + meta, 1)


REFUSED = {400: ("Bad request", "This request has no single, well-formed Host header."),
           403: ("Forbidden", "A request that could change something must come from a page of this viewer."),
           421: ("Misdirected request", "This viewer answers only the names it was started for.")}


def make_app(store: Any, plugins: Any, names: Any = None, log: Any = None) -> Any:
    """The aiohttp application: GET routes only. ``names`` (a :class:`guard.Names`) are the Host
    values answered, every other request refused with no data (None checks nothing: only for an
    application served behind a check of its own); ``log(line)`` is told, in one line, of a page
    that failed (default: stderr)."""
    from aiohttp import web

    from oloproof_core.model.errors import OloproofError, error_line
    from oloproof_core.outputs.report import printable

    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    pages, links = Pages(store, plugins), ServedLinks()
    renderer = ThreadPoolExecutor(1, thread_name_prefix="oloproof-viewer")
    headers = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
    if log is None:
        import sys

        def log(line: str) -> None:
            print(line, file=sys.stderr, flush=True)

    def short(title: str, text: str, status: int) -> web.Response:
        body = pages.env.from_string(
            '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title></head>'
            '<body><h1>{{ title }}</h1><p>{{ text }}</p></body></html>').render(title=title, text=text)
        return web.Response(text=body, status=status, content_type="text/html", headers=headers)

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        if names is not None:
            from oloproof_core.viewer.guard import verdict

            sockname = request.transport.get_extra_info("sockname") if request.transport else None
            routed = getattr(request.match_info, "http_exception", None) is None
            refused = verdict(names, request.method, request.headers, sockname[0] if sockname else None, routed)
            if refused is not None:
                return short(*REFUSED[refused], refused)
        return await handler(request)

    def page(render: Any) -> Any:
        async def handler(request: web.Request) -> web.Response:
            try:  # in the viewer's one rendering thread: a page that reads much never stops the server
                body, status = await asyncio.get_running_loop().run_in_executor(renderer, render, request), 200
            except ConfigError as exc:  # an unknown run, case or object id
                body = pages.env.from_string(
                    '{% extends "base.html" %}{% block body %}<h1>Not found</h1><p>{{ problem }}</p>'
                    '<p><a href="/">All runs</a></p>{% endblock %}').render(links=links, problem=exc.problem)
                status = 404
            except Exception as exc:  # noqa: BLE001 - a store that cannot be read, or a bug: a page and one line
                line = error_line(exc)[0]
                log(printable(f"error: {request.method} {request.path}: {line}"))
                shown = line if isinstance(exc, (OloproofError, OSError)) else (
                    f"internal error ({type(exc).__name__}): the viewer's terminal has the line to report")
                return short("The store could not be read", shown, 500)
            return web.Response(text=body, status=status, content_type="text/html", headers=headers)

        return handler

    app = web.Application(middlewares=[guard])
    app.router.add_get("/", page(lambda r: pages.runs(dict(r.query), links)))
    app.router.add_get("/runs/{run}", page(lambda r: pages.run(r.match_info["run"], dict(r.query), links)))
    app.router.add_get("/runs/{run}/cases/{case}",
                       page(lambda r: pages.case(r.match_info["run"], r.match_info["case"], links)))
    app.router.add_get("/objects/{object}", page(lambda r: pages.object(r.match_info["object"], links)))
    app.router.add_get("/compare", page(lambda r: pages.compare(r.query, links)))
    app.router.add_get("/suite", page(lambda r: pages.suite(dict(r.query), links)))
    return app


def probe(store: Any) -> None:
    """Open the store and read it once, so a store that cannot be opened (not a database, no
    permission, a server that does not answer) stops the viewer before it listens. The id looked
    up cannot be a run's (ids start with a timestamp's first digit, 0 to 7), so no run is read;
    an unknown id is a ConfigError, which means the store answered."""
    try:
        store.resolve_run("run_ZZZZZZZZZZZZZZZZZZZZZZZZZZ")
    except ConfigError:
        pass


def serve(store: Any, plugins: Any, host: str, port: int, announce: Any, open_browser: bool = False,
          allowed: tuple[str, ...] = ()) -> None:
    """Serve until Ctrl-C; ``announce(url)`` is called once the socket listens. ``allowed``: more
    Host names answered (``--allow-host``)."""
    from oloproof_core.viewer.guard import Names

    _one_line_logs()
    holder: dict = {}

    def bound_to(bound: int) -> str:
        holder["names"] = Names(host, bound, allowed)
        return f"http://{host if ':' not in host else f'[{host}]'}:{bound}/"

    serve_app(make_app(store, plugins, _LateNames(holder)), host, port, bound_to, announce, open_browser)


def serve_app(app: Any, host: str, port: int, bound_to: Any, announce: Any, open_browser: bool) -> None:
    """Serve ``app`` until Ctrl-C. Once the socket listens, ``bound_to(port)`` (the port bound, the
    free one for 0) returns the URL that ``announce(url)`` prints and ``open_browser`` opens."""
    import asyncio

    from aiohttp import web

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
            url = bound_to(site._server.sockets[0].getsockname()[1] if port == 0 else port)
            announce(url)
            if open_browser:
                import webbrowser

                webbrowser.open(url)
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass


def _one_line_logs() -> None:
    """aiohttp's own complaints (a request it cannot parse, a client gone) as one line each on
    stderr, never a traceback."""
    import logging
    import sys

    from oloproof_core.outputs.report import printable

    class OneLine(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                exc = record.exc_info[1] if record.exc_info else None
                detail = str(exc).strip().splitlines()[-1:] if exc is not None else []
                text = record.getMessage() + (f": {type(exc).__name__}: {detail[0].strip()}" if detail else "")
                print(printable(f"warning: viewer: {text}"), file=sys.stderr, flush=True)
            except Exception:  # noqa: BLE001 - a log line must never stop the viewer
                pass

    for name in ("aiohttp.server", "aiohttp.web", "aiohttp.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [OneLine(logging.WARNING)]
        logger.propagate = False


class _LateNames:
    """The viewer's names, known once the port is bound (``--port 0``); nothing is answered before."""

    def __init__(self, holder: dict):
        self.holder = holder

    def allows(self, value: str | None, reached: str | None = None) -> bool:
        names = self.holder.get("names")
        return names is not None and names.allows(value, reached)

    def same_origin(self, origin: str | None, host: str | None) -> bool:
        names = self.holder.get("names")
        return names is not None and names.same_origin(origin, host)
