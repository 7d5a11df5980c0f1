"""``oloproof label RUN_ID``: the viewer's labelling page, its only write path.

A small aiohttp application of its own (the read-only viewer of ``server.py`` stays read-only),
bound to 127.0.0.1, serving two routes:

- ``GET /label``: the next planned case of the latest label plan of the run not yet labelled — the
  question, the context given, the answer, the expected answer — with pass / fail / skip buttons
  (access keys p, f, s) and a note. The judge's verdict and rationale of a case are shown only on
  the page after the person has answered it (to avoid anchoring).
- ``POST /label``: stores one label (``storage/labels.py``), then redirects to ``GET /label``.

Every request must name the server in its ``Host`` header (127.0.0.1 or localhost at the bound
port: a page of another site cannot reach it through DNS rebinding); a POST must also come from the
page itself (``Origin``) and carry the session's CSRF token, a random value made when the server
starts and written into the page's form. Anything else is refused (403), any other path is 404 and
any other method 405. The page has no JavaScript; the Content-Security-Policy forbids any script.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any

from oloproof_core.storage.labels import VERDICTS, execution_digest, latest_plan, make_label, put_labels, stored_labels
from oloproof_core.viewer.server import META_CSP, environment
from oloproof_core.storage.stores import resolve_reference

CSP = META_CSP + "; frame-ancestors 'none'"
PAGE = "label.html"  # templates/label.html


def _text(value: Any) -> str:
    import json

    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


class LabelSession:
    """The planned cases of one run and criterion, and what the page shows of them."""

    def __init__(self, store: Any, run_id: str, criterion: str | None, labeller: str):
        from oloproof_core.model.errors import ConfigError

        self.store, self.labeller = store, labeller
        self.run = resolve_reference(store, run_id)
        found = latest_plan(store, self.run, criterion)
        if found is None:
            raise ConfigError(f"no label plan for run {self.run}", fix=f"make one first: oloproof label plan {self.run}")
        self.plan = found[1]
        self.criterion = self.plan["criterion"]
        self.records = {r["id"]: r for r in store.run_cases(self.run)}
        self.token = secrets.token_urlsafe(32)
        self.template = environment().get_template(PAGE)

    def labelled(self) -> set[str]:
        done = stored_labels(self.store, self.criterion)
        return {case for case in self.plan["cases"]
                if (self.criterion, case, execution_digest(self.records[case])) in done}

    def page(self, answered: str | None = None) -> str:
        done = self.labelled()
        todo = [case for case in self.plan["cases"] if case not in done]
        shown = None
        if todo:
            r = self.records[todo[0]]
            question = r["case"].get("input")
            expected = r["case"].get("expected") or {}
            output = r.get("output")
            context = [f"[{item.get('doc_id', '?')}] {item.get('text', '')}"
                       for entry in (r.get("artifacts") or {}).get("context/v1", []) for item in entry.get("items", [])]
            shown = {"id": r["id"], "context": context,
                     "question": _text(question.get("question", question) if isinstance(question, dict) else question),
                     "answer": _text(output.get("answer", output) if isinstance(output, dict) else output),
                     "expected": _text(expected.get("answer", expected)) if expected else ""}
        after = None
        if answered in self.records and answered in done:
            judgment = self.records[answered]["judgments"].get(self.criterion, {})
            label = stored_labels(self.store, self.criterion)[(self.criterion, answered,
                                                              execution_digest(self.records[answered]))]
            after = {"case": answered, "verdict": label["verdict"], "judge": judgment.get("status"),
                     "rationale": (judgment.get("detail") or {}).get("rationale", "")}
        return self.template.render(links=_Links(), criterion=self.criterion, run=self.run, case=shown,
                                    answered=after, done=len(done), total=len(self.plan["cases"]), token=self.token)

    def store_label(self, case: str, verdict: str, note: str) -> None:
        put_labels(self.store, [make_label(self.run, case, self.criterion, verdict,
                                           execution_digest(self.records[case]), self.labeller, note)])


class _Links:
    def home(self) -> str:
        return "/label"


def make_label_app(session: LabelSession, allowed_hosts: list[str]) -> Any:
    """The application; ``allowed_hosts`` (filled in once the port is known) are the Host values
    accepted, and the origins ``http://HOST``."""
    from aiohttp import web

    headers = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
               "Referrer-Policy": "same-origin", "Cache-Control": "no-store"}

    def refuse(reason: str) -> web.Response:
        return web.Response(text=f"refused: {reason}\n", status=403, content_type="text/plain", headers=headers)

    @web.middleware
    async def check_host(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.host not in allowed_hosts:
            return refuse("unknown Host")
        return await handler(request)

    async def show(request: web.Request) -> web.Response:
        return web.Response(text=session.page(request.query.get("answered")), content_type="text/html",
                            headers=headers)

    async def post(request: web.Request) -> web.Response:
        if request.headers.get("Origin") not in [f"http://{host}" for host in allowed_hosts]:
            return refuse("the request does not come from this page (Origin)")
        form = await request.post()
        token = str(form.get("token", ""))
        if not hmac.compare_digest(token.encode(), session.token.encode()):
            return refuse("missing or wrong token")
        case, verdict, note = str(form.get("case", "")), str(form.get("verdict", "")), str(form.get("note", ""))
        if case not in session.plan["cases"] or verdict not in VERDICTS:
            return web.Response(text="a label needs a planned case and pass, fail or skip\n", status=400,
                                content_type="text/plain", headers=headers)
        session.store_label(case, verdict, note[:2000])
        from urllib.parse import quote

        raise web.HTTPSeeOther(f"/label?answered={quote(case, safe='')}", headers=headers)

    async def home(request: web.Request) -> web.Response:
        raise web.HTTPSeeOther("/label")

    app = web.Application(middlewares=[check_host], client_max_size=64 * 1024)
    app.router.add_get("/", home)
    app.router.add_get("/label", show)
    app.router.add_post("/label", post)
    return app


def serve_labels(session: LabelSession, port: int, announce: Any, open_browser: bool) -> None:
    """Serve the labelling page on 127.0.0.1 until Ctrl-C."""
    from oloproof_core.viewer.server import serve_app

    allowed: list[str] = []

    def bound_to(bound: int) -> str:
        allowed.extend([f"127.0.0.1:{bound}", f"localhost:{bound}"])
        return f"http://127.0.0.1:{bound}/label"

    serve_app(make_label_app(session, allowed), "127.0.0.1", port, bound_to, announce, open_browser)
