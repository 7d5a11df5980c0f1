"""The viewer's pages for daily use, through real HTTP: failures first, search over a case's text,
sorting, the runs list (identity, headline, gate, child runs folded, compare form), two runs side
by side, and the newcomer's paper cuts (scores not coloured failed, trials runs' slice names and
every trial's answer, the export's links, rounding, plural, the plots' axis).

The application is served in-process (``make_app`` on a free port in a thread); the stores are
filled by the real command line."""

from __future__ import annotations

import asyncio
import html
import re
import socket
import threading
from pathlib import Path
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest

from conftest import Project, olo

RUN_ID = re.compile(r"run_[0-9A-HJKMNP-TV-Z]{26}")
pytestmark = pytest.mark.slow


class Served:
    """``make_app`` of a project's store, on 127.0.0.1 in a thread."""

    def __init__(self, root: Path):
        from aiohttp import web

        from oloproof_core.viewer.server import make_app
        from oloproof_core.workflows.project import Project as Loaded

        project = Loaded(str(root / "oloproof.yaml"), None, existing=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(make_app(project.reader(), project.plugins, log=lambda line: None))
        self.loop.run_until_complete(self.runner.setup())
        self.loop.run_until_complete(web.SockSite(self.runner, self.sock).start())
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def get(self, path: str) -> str:
        with urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=60) as response:
            assert response.status == 200
            return response.read().decode("utf-8")

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.run_until_complete(self.runner.cleanup())
        self.loop.close()


def table(page: str, table_id: str) -> list[list[str]]:
    """The text of each row's cells of ``<table id=table_id>`` (the header row left out)."""
    body = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.S)
    assert body, table_id
    rows = []
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1), re.S)[1:]:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        rows.append([html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells])
    return rows


def td_classes(page: str, table_id: str) -> list[list[str]]:
    body = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.S).group(1)
    return [re.findall(r"<td(?: class=\"([^\"]*)\")?[^>]*>", row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)[1:]]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The support_rag example: run, diagnose (two child runs), token_budget 120, run, compare."""
    root = tmp_path_factory.mktemp("daily")
    assert olo("init", "--example", "support_rag", "demo", cwd=root).code == 0
    project = root / "demo"
    base_id = RUN_ID.search(olo("run", cwd=project).out).group(0)
    diag = olo("diagnose", base_id, "--intervention", "gold-context", "--criterion", "answer_correct", cwd=project)
    assert diag.code == 0, diag
    config = project / "oloproof.yaml"
    config.write_text(config.read_text().replace("token_budget: 40", "token_budget: 120"))
    cand_id = RUN_ID.search(olo("run", cwd=project).out).group(0)
    comparison = olo("compare", cand_id, base_id, "--policy", "compare.yaml", cwd=project)
    served = Served(project)
    yield {"dir": project, "base": base_id, "cand": cand_id, "served": served,
           "children": RUN_ID.findall(diag.out.split("Child runs:")[1].splitlines()[0]),
           "comparison": re.search(r"sha256:[0-9a-f]{64}", comparison.out).group(0)}
    served.close()


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    """Two trials a case whose answers differ (the second trial answers wrong), sliced by topic."""
    project = Project(tmp_path_factory.mktemp("trials"))
    project.write("app.py", """
        from oloproof import current_case, system

        @system(name="flaky", version="1")
        def run(input):
            return {"answer": input["q"] if current_case().trial == 0 else f"second try {input['q']}!"}
    """)
    project.write("oloproof.yaml", """
        system:
          callable: app:run
        cases: cases.jsonl
        trials: 2
        slices: [metadata.topic]
        evaluators:
          - {type: exact, criterion: exact, field: answer, expected_field: answer}
    """)
    project.cases([{"id": f"t{i}", "input": {"q": f"answer {i}"}, "expected": {"answer": f"answer {i}"},
                    "metadata": {"topic": "even" if i % 2 == 0 else "odd"}} for i in range(4)])
    result = project.run("run")
    assert result.code in (0, 1, 3), result
    served = Served(project.root)
    yield {"dir": project.root, "run": RUN_ID.search(result.out).group(0), "served": served}
    served.close()


# -- item 4: paper cuts -----------------------------------------------------------------------------

def test_a_score_is_not_coloured_failed_and_is_rounded(demo):
    page = demo["served"].get(f"/runs/{demo['base']}")
    criteria = [re.sub(r"<[^>]+>|[▲▼]", "", c).strip()
                for c in re.findall(r"<th>(.*?)</th>", re.search(r'<table id="cases">(.*?)</tr>', page, re.S).group(1))]
    ndcg = criteria.index("ndcg_at_6")
    rows = {r[0].split()[0]: r for r in table(page, "cases")}
    assert rows["refund_review"][ndcg] == "0.631"  # not 0.6309297535714575, not "failed"
    assert all(c[ndcg] == "scored" for c in td_classes(page, "cases"))
    case = demo["served"].get(f"/runs/{demo['base']}/cases/refund_review")
    judged = {r[0]: r for r in re.findall(r"<tr><td>(\w+)</td><td class=\"(\w+)\">\w+</td><td class=\"num\">([^<]*)</td>",
                                          case)}
    assert judged["ndcg_at_6"][1:] == ("scored", "0.631")
    assert judged["answer_correct"][1:] == ("failed", "0.000")
    scores = re.findall(r'<table class="retrieval">.*?</table>', case, re.S)[0]
    assert not re.search(r'<td class="num">\d+\.\d{4,}</td>', scores)  # every score rounded


def test_one_passage_is_singular_and_the_plots_have_an_axis(demo):
    served = demo["served"]
    for case_id in ("refund_review", "money_back", "seat_count", "free_trial"):
        text = served.get(f"/runs/{demo['base']}/cases/{case_id}")
        assert "1 passages" not in text
    page = served.get(f"/runs/{demo['base']}")
    assert page.count('<div class="axis"><span>0</span><span>1</span></div>') == 5
    compared = served.get(f"/objects/{demo['comparison']}")
    assert re.search(r'<div class="axis"><span>-[\d.]+</span><span>0</span><span>\+[\d.]+</span></div>', compared)


def test_a_trials_run_names_its_slice_groups_and_shows_every_trial(trials):
    served = trials["served"]
    page = served.get(f"/runs/{trials['run']}")
    assert "&lt;function" not in page and "<function" not in page
    assert re.search(r"<td>even</td>", page) and re.search(r"<td>odd</td>", page)
    case = served.get(f"/runs/{trials['run']}/cases/t1")
    shown = table(case.replace('<table class="trials">', '<table id="trials">'), "trials")
    assert [r[0] for r in shown] == ["1", "2"]
    assert '"answer 1"' in html.unescape(shown[0][1]) and '"second try answer 1!"' in html.unescape(shown[1][1])
    assert [r[2] for r in shown] == ["passed", "failed"]
    text = olo("inspect", trials["run"], "--case", "t1", cwd=trials["dir"])
    assert text.code == 0, text
    assert "trial 1: exact passed" in text.out and "trial 2: exact failed" in text.out
    assert "second try answer 1!" in text.out


def test_a_trials_run_s_export_holds_every_trial(trials, tmp_path):
    out = tmp_path / "trials.html"
    assert olo("export", trials["run"], "--html", str(out), cwd=trials["dir"]).code == 0
    text = html.unescape(out.read_text(encoding="utf-8"))
    assert "second try answer 3!" in text and "<function" not in text


def test_the_export_has_no_dead_anchors(demo, tmp_path):
    out = tmp_path / "report.html"
    assert olo("export", demo["base"], "--html", str(out), cwd=demo["dir"]).code == 0
    text = out.read_text(encoding="utf-8")
    ids = set(re.findall(r'id="([^"]+)"', text))
    for href in re.findall(r'href="#([^"]+)"', text):
        from urllib.parse import unquote

        assert unquote(href) in ids, href
    assert "gold context" in text and demo["children"][0] in text  # named, not linked


# -- item 1: the run page ----------------------------------------------------------------------------

def test_the_run_page_puts_the_failures_before_the_metrics_and_folds_the_slices(demo):
    page = demo["served"].get(f"/runs/{demo['base']}")
    assert page.index('id="gate"') < page.index('id="failing"') < page.index('id="metrics"') < page.index(
        'id="cases"') < page.index('<details class="slices">')
    assert sorted(r[0] for r in table(page, "failing")) == sorted(["money_back", "refund_review",
                                                                  "security_review", "seat_count"])
    assert dict((r[0], r[1]) for r in table(page, "failing"))["money_back"] == "answer_correct, hit_rate_at_2"


def test_search_reads_the_input_output_and_expected_text(demo):
    served, run = demo["served"], demo["base"]

    def found(q: str) -> list[str]:
        return sorted(r[0].split()[0] for r in table(served.get(f"/runs/{run}?" + urlencode({"q": q})), "cases"))

    assert found("money_back") == ["money_back"]  # the id, as before
    assert found("topic=security") == ["encryption", "security_review", "sso_providers"]  # metadata, as before
    assert found("SAML") and all(found("SAML"))  # input/output/expected text, case-insensitively
    assert found("expected_text_not_found") == sorted(["money_back", "refund_review", "security_review", "seat_count"])
    assert found("no such words anywhere") == []


def test_the_cases_table_sorts_by_a_column_and_reverses(demo):
    served, run = demo["served"], demo["base"]
    by_answer = [r[0].split()[0] for r in table(served.get(f"/runs/{run}?sort=answer_correct"), "cases")]
    assert set(by_answer[:4]) == {"money_back", "refund_review", "security_review", "seat_count"}  # failed first
    page = served.get(f"/runs/{run}?sort=ndcg_at_6")
    values = [float(r[4]) for r in table(page, "cases")]
    assert values == sorted(values)
    assert "sort=ndcg_at_6&amp;desc=1" in page  # the same header again reverses
    values = [float(r[4]) for r in table(served.get(f"/runs/{run}?sort=ndcg_at_6&desc=1"), "cases")]
    assert values == sorted(values, reverse=True)
    ids = [r[0].split()[0] for r in table(served.get(f"/runs/{run}?sort=case&status=failed"), "cases")]
    assert ids == sorted(ids) and "money_back" in ids
    served.get(f"/runs/{run}?sort=%3Cscript%3E")  # an unknown column is the run's order, no error


# -- item 3: the runs list ---------------------------------------------------------------------------

def test_the_runs_list_tells_runs_apart_and_folds_child_runs(demo):
    page = demo["served"].get("/")
    runs = {r[0]: r for r in table(page, "runs")}
    assert set(runs) == {demo["base"], demo["cand"]}  # child runs folded
    assert runs[demo["cand"]][1] == "BLOCK"
    assert runs[demo["cand"]][2] == "answer_correct 69.2% [38.5%, 91.0%]"
    assert runs[demo["cand"]][7] == "token_budget 40 → 120"
    assert runs[demo["base"]][6].split()[1] != runs[demo["cand"]][6].split()[1]  # config hashes differ
    assert "child runs: gold context · control" in runs[demo["base"]][10]
    every = {r[0] for r in table(demo["served"].get("/?all=1"), "runs")}
    assert every == {demo["base"], demo["cand"], *demo["children"]}
    assert {r[0] for r in table(demo["served"].get("/?state=DIAGNOSTIC"), "runs")} == set(demo["children"])
    assert '<form method="get" action="/compare"' in page and page.count('type="checkbox" name="run"') == 2


# -- item 2: two runs side by side -------------------------------------------------------------------

def test_two_ticked_runs_compare_side_by_side(demo):
    served = demo["served"]
    page = served.get("/compare?" + urlencode([("run", demo["base"]), ("run", demo["cand"])]))
    assert "Settings changed: token_budget 40 → 120" in page
    rows = {r[0]: r for r in table(page, "estimates")}
    assert rows["answer_correct"][1:4] == ["69.2% [38.5%, 91.0%]", "69.2% [38.5%, 91.0%]",
                                           "+0.0 points [-33.6, +33.6]"]
    assert demo["comparison"][:23] in page and table(page, "decisions")
    stored = served.get(f"/objects/{demo['comparison']}")
    assert "side by side, case by case" in stored
    assert [r[5:7] for r in table(stored, "differences")][0] == ["69.2% [38.5%, 91.0%]", "69.2% [38.5%, 91.0%]"]
    from urllib.error import HTTPError

    with pytest.raises(HTTPError) as one:
        served.get("/compare?run=" + demo["base"])
    assert one.value.code == 404
    one.value.close()


def test_a_changed_case_shows_both_outputs_and_a_word_diff(tmp_path):
    project = Project(tmp_path)
    project.write("app.py", """
        import os
        from oloproof import system

        @system(name="echo", version=os.environ.get("V", "1"))
        def run(input):
            return {"answer": input["q"] if os.environ.get("V") != "2" else "a different reply"}
    """)
    project.write("oloproof.yaml", """
        system:
          callable: app:run
        cases: cases.jsonl
        evaluators:
          - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
    """)
    project.cases([{"id": "a", "input": {"q": "the answer is 4"}, "expected": {"answer": "4"}}])
    first = RUN_ID.search(project.run("run").out).group(0)
    second = RUN_ID.search(project.run("run", env={"V": "2"}).out).group(0)
    served = Served(tmp_path)
    try:
        page = served.get("/compare?" + urlencode([("run", first), ("run", second)]))
        assert 'id="pair-a"' in page and ">broken<" in page
        assert "<del>the answer is 4\"}</del>" in page.replace("&#34;", '"') or "<del>" in page
        assert "<ins>" in page and "a different reply" in page
        assert "broken (1)" in page
        fixed = served.get("/compare?" + urlencode([("run", first), ("run", second), ("show", "fixed")]))
        assert 'id="pair-a"' not in fixed
    finally:
        served.close()


# -- the suite page, the side-by-side judgments and retrievals, a large run's page ------------------

def test_the_suite_page_draws_each_metric_across_the_suite_s_runs(demo):
    served = demo["served"]
    runs = served.get("/")
    link = re.search(r'<a class="suite" href="([^"]+)"', runs)
    assert link, "the runs list links each run's suite"
    page = served.get(html.unescape(link.group(1)))
    assert "Suite support-rag" in page and "oloproof.yaml" in page
    trend = re.search(r'<section class="trend" id="trend-answer_correct">(.*?)</section>', page, re.S).group(1)
    assert trend.count('<circle class="estimate"') == 2, "one point a run; the diagnosis's child runs are not the suite's"
    assert trend.count('<line class="interval"') == 2 and '<line class="axis"' in trend
    assert [t for t in re.findall(r'<text class="tick"[^>]*>([^<]+)</text>', trend)] == ["0", "0.25", "0.5", "0.75", "1"]
    assert '<line class="threshold"' in trend, "the gated metric's threshold is drawn"
    rows = [r[1] for r in table(trend.replace('class="trend-table"', 'id="t"'), "t")]
    assert rows == [demo["base"], demo["cand"]], "oldest first"
    from urllib.error import HTTPError

    with pytest.raises(HTTPError) as unknown:
        served.get("/suite?system=nothing&config=x.yaml")
    assert unknown.value.code == 404
    unknown.value.close()


def test_a_changed_case_shows_both_judgments_and_both_retrievals(tmp_path):
    project = Project(tmp_path)
    project.write("app.py", """
        import os
        from oloproof import Passage, Retrieval, current_case, system

        @system(name="rag", version=os.environ.get("V", "1"), records=("retrieval/v1",))
        def run(input):
            docs = ("faq", "policy") if os.environ.get("V") != "2" else ("blog",)
            current_case().retrieval(Retrieval(query=input["q"], depth=2,
                                               candidates=tuple(Passage(doc_id=d, score=0.5) for d in docs)))
            return {"answer": "refunds take 14 days" if os.environ.get("V") != "2" else "no idea"}
    """)
    project.write("oloproof.yaml", """
        system:
          callable: app:run
        cases: cases.jsonl
        evaluators:
          - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
    """)
    project.cases([{"id": "a", "input": {"q": "how long do refunds take"}, "expected": {"answer": "14 days"}}])
    first = RUN_ID.search(project.run("run").out).group(0)
    second = RUN_ID.search(project.run("run", env={"V": "2"}).out).group(0)
    served = Served(tmp_path)
    try:
        page = served.get("/compare?" + urlencode([("run", first), ("run", second)]))
    finally:
        served.close()
    body = re.search(r'<section class="pair" id="pair-a">(.*?)</section>', page, re.S).group(1)
    before = re.search(r'<table class="retrieval baseline">(.*?)</table>', body, re.S).group(1)
    after = re.search(r'<table class="retrieval candidate">(.*?)</table>', body, re.S).group(1)
    assert "faq" in before and "policy" in before and "blog" not in before
    assert "blog" in after and "faq" not in after
    verdicts = re.findall(r'<td class="(passed|failed)">\1</td><td class="why">([^<]*)</td>', body)
    assert verdicts == [("passed", ""), ("failed", "expected_text_not_found")], "both judgments, with the reason given"


def test_a_large_run_s_page_comes_at_once_and_lists_its_failures_when_read(demo, monkeypatch):
    """A run over WHOLE cases (here lowered to 5) is served from its summary while one background
    pass finds its failures through the store's index; the page reloads itself until then."""
    import time

    from oloproof_core.viewer import server

    monkeypatch.setattr(server, "WHOLE", 5)
    served = Served(demo["dir"])
    try:
        first = served.get(f"/runs/{demo['base']}")
        assert table(first, "cases"), "the cases table is there at once"
        if 'id="reading"' in first:
            assert '<meta http-equiv="refresh" content="5">' in first
        assert "Slices" in first and "not drawn for a run this large" in first
        for _ in range(600):  # the background pass, on a loaded machine
            page = served.get(f"/runs/{demo['base']}")
            if 'id="failing"' in page:
                break
            time.sleep(0.1)
        assert 'id="failing"' in page, re.search(r'<h2 id="failures">.*?</p>', page, re.S).group(0)
        assert sorted(r[0] for r in table(page, "failing")) == sorted(
            ["money_back", "refund_review", "security_review", "seat_count"])
        assert 'http-equiv="refresh"' not in page
    finally:
        served.close()


def test_a_store_without_query_cases_is_scanned_with_the_same_answers(tmp_path):
    from oloproof_jsonfolder_store import JsonFolderStore, Options
    from oloproof_local import LocalStore, Options as LocalOptions

    from oloproof.testing import SUMMARY, run_header
    from oloproof_core.storage.contract_query import QUERIED, QUERIES, queried_records
    from oloproof_core.storage.query import query_cases

    folder, local = JsonFolderStore(Options(path="store"), tmp_path), LocalStore(LocalOptions(), tmp_path)
    assert not hasattr(folder, "query_cases")
    for store in (folder, local):
        store.save_run(run_header(QUERIED, 40), queried_records(), SUMMARY)
    for query in QUERIES:
        assert query_cases(folder, QUERIED, **query) == local.query_cases(QUERIED, **query), query
