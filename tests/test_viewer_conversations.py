"""Conversations in the viewer, the export and ``inspect --case``, on a real run of a staged assistant
(tests/chat_project.py): a turn case's page shows its whole conversation as a transcript (each
turn's input, output, judgments, retrieval and the query searched, the current turn marked, links
to the other turns); the run page narrows its cases to one conversation; the terminal view shows
the earlier turns. The application is served in-process over real HTTP, as in test_viewer_pages.py.
"""

from __future__ import annotations

import html
import json
import re
from urllib.parse import quote, unquote

import pytest
from chat_project import HOSTILE, PAYLOAD, chat_project
from conftest import olo
from test_viewer_pages import RUN_ID, Served, table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chat(tmp_path_factory):
    project = chat_project(tmp_path_factory.mktemp("chat"))
    result = project.run("run")
    assert result.code == 0, result
    served = Served(project.root)
    yield {"dir": project.root, "run": RUN_ID.search(result.out).group(0), "served": served, "out": result.out}
    served.close()


def turns(page: str) -> list[str]:
    """The transcript's turns, each its HTML, in order."""
    found = re.search(r'<ol class="transcript">(.*?)</ol>', page, re.S)
    assert found, "no transcript"
    return re.findall(r'<li class="turn[^"]*"[^>]*>(.*?)</li>', found.group(1), re.S)


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


def test_a_turn_case_shows_its_whole_conversation(chat):
    run = chat["run"]
    page = chat["served"].get(f"/runs/{run}/cases/{quote('refund-annual#2', safe='')}")
    assert "Conversation refund-annual" in page and "turn 2 of 3" in page
    shown = turns(page)
    assert len(shown) == 3
    current = re.findall(r'<li class="turn( current)?"', page)
    assert current == ["", " current", ""]  # the current turn, and only it, is marked
    assert "this turn" in shown[1] and 'href=' not in shown[1].split("</h3>")[0]
    for k in (1, 3):  # the other turns link to their pages
        assert f'href="/runs/{run}/cases/refund-annual%23{k}"' in shown[k - 1]
    # each turn's input, output, verdicts, retrieval and the query its retrieval searched for
    assert "How do I get a refund?" in text(shown[0]) and "within 14 days" in text(shown[0])
    assert "And for annual plans?" in text(shown[1]) and "pro rata" in text(shown[1])
    assert "searched for: How do I get a refund? And for annual plans?" in " ".join(text(shown[1]).split())
    verdicts = [re.findall(r'<td>(answer_correct|hit_rate_at_2)</td><td class="(\w+)">', t) for t in shown]
    assert verdicts == [[("answer_correct", "passed"), ("hit_rate_at_2", "passed")]] * 2 + [
        [("answer_correct", "failed"), ("hit_rate_at_2", "passed")]]
    second = table(shown[1].replace('<table class="turn-retrieval">', '<table id="r">'), "r")
    assert second[0][:6] == ["1", "2.000", "kb-annual", "", "✓ doc", "kept"]
    assert [row[2] for row in second] == ["kb-annual", "kb-refunds"]
    assert "link to all turns" not in page and f"/runs/{run}?conversation=refund-annual" in page


def test_the_conversation_criteria_are_shown_once_for_the_conversation(chat):
    """``X (all turns)`` and the scope: conversation judge are the conversation's verdicts (recorded
    on its last turn, excluded from the others): one table above the turns, the LLM judge named."""
    page = chat["served"].get(f"/runs/{chat['run']}/cases/{quote('refund-annual#1', safe='')}")
    criteria = table(page.replace('<table class="conversation-criteria">', '<table id="whole">'), "whole")
    assert [row[:2] for row in criteria] == [["kept_topic", "passed"], ["answer_correct (all turns)", "failed"],
                                             ["hit_rate_at_2 (all turns)", "passed"]]
    assert criteria[0][3] == "replayed from replies.jsonl, not a model: Every answer is about refunds."
    assert criteria[0][4] == "an LLM judge (replay/replay, prompt rubric/transcript-v1) over the whole transcript"
    assert criteria[1][3] == "turn 3 failed" and "every turn must pass" in criteria[1][4]
    transcript = re.search(r'<ol class="transcript">.*?</ol>', page, re.S).group(0)
    assert "judged_on_last_turn" not in transcript and "kept_topic" not in transcript
    hostile = chat["served"].get(f"/runs/{chat['run']}/cases/{quote(HOSTILE + '#2', safe='')}")
    whole = table(hostile.replace('<table class="conversation-criteria">', '<table id="whole">'), "whole")
    assert [row[:2] for row in whole][:2] == [["kept_topic", "failed"], ["answer_correct (all turns)", "failed"]]


def test_every_turn_s_page_holds_the_same_transcript_and_a_plain_case_none(chat):
    run, served = chat["run"], chat["served"]
    pages = [served.get(f"/runs/{run}/cases/{quote(f'refund-annual#{k}', safe='')}") for k in (1, 2, 3)]
    for k, page in enumerate(pages, 1):
        marks = re.findall(r'<li class="turn( current)?"', page)
        assert marks.index(" current") == k - 1 and marks.count(" current") == 1
        assert [re.findall(r"<pre[^>]*>(.*?)</pre>", t, re.S) for t in turns(page)] == [
            re.findall(r"<pre[^>]*>(.*?)</pre>", t, re.S) for t in turns(pages[0])]
    assert 'class="transcript"' not in served.get(f"/runs/{run}/cases/hours")  # one turn: no conversation


def test_the_run_page_prints_the_clusters_and_first_failing_turn_lines_as_run_did(chat):
    page = chat["served"].get(f"/runs/{chat['run']}")
    shown = html.unescape(re.search(r'<p class="muted" id="units">(.*?)</p>', page, re.S).group(1)).split("<br>")
    printed = [line for line in chat["out"].splitlines() if line.startswith(("Clusters:", "First failing turn:"))]
    assert shown == printed and len(printed) == 3
    assert "First failing turn: answer_correct (all turns): turn 2 (1), turn 3 (1); 2 of 3 conversations failed" in shown


def test_the_run_page_narrows_its_cases_to_one_conversation(chat):
    run, served = chat["run"], chat["served"]
    page = served.get(f"/runs/{run}")
    assert '<input name="conversation"' in page  # the run's cases are conversations
    narrowed = served.get(f"/runs/{run}?conversation=refund-annual")
    assert [r[0] for r in table(narrowed, "cases")] == ["refund-annual#1", "refund-annual#2", "refund-annual#3"]
    assert "3 of the 3 turns of conversation" in text(narrowed)
    failed = served.get(f"/runs/{run}?conversation=refund-annual&criterion=answer_correct&status=failed")
    assert [r[0] for r in table(failed, "cases")] == ["refund-annual#3"]
    reversed_ = served.get(f"/runs/{run}?conversation=refund-annual&sort=case&desc=1")
    assert [r[0] for r in table(reversed_, "cases")] == ["refund-annual#3", "refund-annual#2", "refund-annual#1"]
    assert "conversation=refund-annual" in re.search(r'<table id="cases">.*?</tr>', reversed_, re.S).group(0)
    searched = served.get(f"/runs/{run}?conversation=refund-annual&q=plans")
    assert [r[0] for r in table(searched, "cases")] == ["refund-annual#2"]
    plain = served.get(f"/runs/{run}?conversation=hours")  # a plain case is a conversation of one turn
    assert [r[0] for r in table(plain, "cases")] == ["hours"]
    assert table(served.get(f"/runs/{run}?conversation=refund"), "cases") == []  # exact, not a prefix


def test_untrusted_text_of_a_conversation_stays_text(chat, tmp_path):
    run, served = chat["run"], chat["served"]
    page = served.get(f"/runs/{run}/cases/{quote(HOSTILE + '#1', safe='')}")
    assert len(turns(page)) == 2
    assert "<script>window.__xss" not in page and "<img src=x" not in page
    assert json.dumps("And " + PAYLOAD) in html.unescape(turns(page)[1])  # shown as the text it is
    assert f'href="/runs/{run}/cases/{quote(HOSTILE + "#2", safe="")}"' in page
    narrowed = served.get(f"/runs/{run}?{'conversation=' + quote(HOSTILE, safe='')}")
    assert [r[0] for r in table(narrowed, "cases")] == [HOSTILE + "#1", HOSTILE + "#2"]
    out = tmp_path / "chat.html"
    assert olo("export", run, "--html", str(out), cwd=chat["dir"]).code == 0
    exported = out.read_text(encoding="utf-8")
    assert "<script>window.__xss" not in exported and "<img src=x" not in exported


def test_the_export_links_each_turn_to_its_anchor(chat, tmp_path):
    out = tmp_path / "chat.html"
    assert olo("export", chat["run"], "--html", str(out), cwd=chat["dir"]).code == 0
    exported = out.read_text(encoding="utf-8")
    ids = {html.unescape(i) for i in re.findall(r'id="([^"]+)"', exported)}
    hrefs = re.findall(r'href="#([^"]+)"', exported)
    assert "case-refund-annual%233" in hrefs
    for href in hrefs:
        assert unquote(html.unescape(href)) in ids, href
    assert exported.count('<ol class="transcript">') == 5  # every turn of a conversation of two or more
    assert "?conversation=" not in exported  # the file's table is not filtered


def test_inspect_a_turn_shows_the_turns_before_it(chat):
    shown = olo("inspect", chat["run"], "--case", "refund-annual#3", cwd=chat["dir"])
    assert shown.code == 0, shown
    lines = shown.out.splitlines()
    assert lines[1:6] == [
        "Conversation refund-annual: turn 3 of 3; the turns before it, as it received them:",
        '  1 input:  {"question": "How do I get a refund?"}',
        '    output: {"answer": "A refund is issued within 14 days of an approved request."}',
        '  2 input:  {"question": "And for annual plans?"}',
        '    output: {"answer": "Annual plans are refunded pro rata for the unused months."}']
    assert lines[6] == "Input"
    first = olo("inspect", chat["run"], "--case", "refund-annual#1", cwd=chat["dir"]).out.splitlines()
    assert first[1:3] == ["Conversation refund-annual: turn 1 of 3", "Input"]
    plain = olo("inspect", chat["run"], "--case", "hours", cwd=chat["dir"]).out.splitlines()
    assert plain[1] == "Input"


def test_a_store_without_one_case_lookup_gives_the_same_transcript_and_filter(chat):
    """A third party's store may have neither ``run_case`` nor ``query_cases``: one scan of the run
    finds the turns, with the same answers."""
    from oloproof_core.outputs import pages as views
    from oloproof_core.workflows.project import Project as Loaded

    store = Loaded(str(chat["dir"] / "oloproof.yaml"), None, existing=True).reader()

    class Scanned:  # the store's reading methods, without the two lookups
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            if name in ("run_case", "query_cases"):
                raise AttributeError(name)
            return getattr(self.inner, name)

    run, scanned = chat["run"], Scanned(store)
    assert not hasattr(scanned, "run_case")
    for case_id in ("refund-annual#2", HOSTILE + "#1", "hours"):
        direct = views.case_view(store, views.Records(store), run, case_id)["conversation"]
        assert views.case_view(scanned, views.Records(scanned), run, case_id)["conversation"] == direct
    direct = views.case_view(store, views.Records(store), run, "refund-annual#2")["conversation"]
    assert [t["current"] for t in direct["turns"]] == [False, True, False]
    criteria = ["answer_correct", "hit_rate_at_2"]
    for conversation in ("refund-annual", "hours", "refund"):
        assert views.cases_page(scanned, run, criteria, conversation=conversation) == views.cases_page(
            store, run, criteria, conversation=conversation)
