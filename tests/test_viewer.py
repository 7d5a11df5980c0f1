"""The browser viewer and the HTML export, in Debian's Chromium driven through chromedriver.

A store is filled by the shipped support_rag example (a run, a diagnosis, a second run and a
compare); ``oloproof view`` serves it on a free port, and every page type is visited, links are
followed, the numbers are checked against ``oloproof run``'s, and the browser's console must stay
clean. A second project holds a case made of script-injection attempts, which must render inert.
The screenshots in docs/images/ are the ones these tests take.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote
from urllib.request import urlopen

import pytest

from conftest import Project, olo

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "docs" / "images"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
RUN_ID = re.compile(r"run_[0-9A-HJKMNP-TV-Z]{26}")
PAYLOAD = '<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">'
JS_URL = "javascript:window.__xss=3"


def rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("│").split("│")] for line in text.splitlines()
            if line.startswith("│")]


class Viewer:
    """``oloproof view --port 0`` in a subprocess; ``url`` once it listens."""

    def __init__(self, cwd: Path):
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "oloproof", "view", "--port", "0"], cwd=cwd, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        found = re.search(r"http://\S+/", line)
        assert found, (line, self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.url = found.group(0).rstrip("/")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=20)
        finally:
            self.proc.stdout.close()
            self.proc.stderr.close()


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The support_rag example after the documented steps: run, diagnose, token_budget 120, run, compare."""
    root = tmp_path_factory.mktemp("viewer")
    assert olo("init", "--example", "support_rag", "demo", cwd=root).code == 0
    project = root / "demo"
    base = olo("run", cwd=project)
    base_id = RUN_ID.search(base.out).group(0)
    diag = olo("diagnose", base_id, "--intervention", "gold-context", "--criterion", "answer_correct", cwd=project)
    assert diag.code == 0, diag
    config = project / "oloproof.yaml"
    config.write_text(config.read_text().replace("token_budget: 40", "token_budget: 120"))
    cand = olo("run", cwd=project)
    cand_id = RUN_ID.search(cand.out).group(0)
    comparison = olo("compare", cand_id, base_id, "--policy", "compare.yaml", cwd=project)
    return {"dir": project, "base": base, "base_id": base_id, "cand_id": cand_id,
            "diagnosis": re.search(r"sha256:[0-9a-f]{64}", diag.out).group(0),
            "comparison": re.search(r"sha256:[0-9a-f]{64}", comparison.out).group(0), "compare": comparison,
            "children": RUN_ID.findall(diag.out.split("Child runs:")[1].splitlines()[0])}


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    """A judge (the offline replay provider) validated against human labels."""
    project = Project(tmp_path_factory.mktemp("validated"))
    project.write("app.py", """
        from oloproof import Context, ContextItem, current_case, system

        @system(name="tiny", version="1", records=("context/v1",))
        def run(input):
            current_case().context(Context(items=(ContextItem(doc_id="d", position=1, text="Refunds take 14 days."),)))
            return {"answer": input["q"]}
    """)
    project.write("oloproof.yaml", """
        system:
          callable: app:run
        cases: cases.jsonl
        evaluators:
          - {type: groundedness_judge, provider: replay, model: replay,
             provider_options: {file: replies.jsonl, default: fail}}
    """)
    project.write("replies.jsonl", "".join(json.dumps({"match": f"Answer:\n{answer}", "verdict": "pass"}) + "\n"
                                           for answer in ("Refunds take 14 days.", "It takes 14 days.")))
    rows = [("a", "Refunds take 14 days.", True), ("b", "Refunds take 30 days.", False),
            ("c", "It takes 14 days.", True), ("d", "Never.", False), ("e", "Within 14 days.", True)]
    project.cases([{"id": i, "input": {"q": q}, "expected": {}} for i, q, _ in rows])
    project.write("labels.jsonl", "".join(json.dumps({"id": i, "label": label}) + "\n" for i, _, label in rows))
    assert project.run("run").code == 0
    result = project.run("judge", "validate", "--labels", "labels.jsonl", "--criterion", "grounded")
    assert result.code == 0, result
    return {"dir": project.root, "out": result.out,
            "validation": re.search(r"sha256:[0-9a-f]{64}", result.out).group(0)}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A project whose one case's id, input and output are injection attempts."""
    project = Project(tmp_path_factory.mktemp("hostile"))
    project.write("app.py", """
        from oloproof import system

        @system(name="echo", version="1")
        def run(input):
            return {"answer": input["q"], "link": input["link"]}
    """)
    project.write("oloproof.yaml", """
        system:
          callable: app:run
        cases: cases.jsonl
        evaluators:
          - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
    """)
    project.cases([{"id": "x" + PAYLOAD, "input": {"q": PAYLOAD, "link": JS_URL},
                    "expected": {"answer": "nothing like it"}, "metadata": {"note": PAYLOAD}}])
    result = project.run("run")
    assert result.code == 0, result
    return {"dir": project.root, "run_id": RUN_ID.search(result.out).group(0)}


@pytest.mark.slow
def test_the_export_escapes_every_field_of_a_hostile_case(hostile, tmp_path):
    out = tmp_path / "report.html"
    result = olo("export", hostile["run_id"], "--html", str(out), cwd=hostile["dir"])
    assert result.code == 0, result
    html = out.read_text(encoding="utf-8")
    assert "<script>window.__xss" not in html and "<img src=x" not in html
    assert 'href="javascript:' not in html
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html
    assert "Content-Security-Policy" in html


@pytest.mark.slow
def test_an_unknown_id_is_a_404_page_and_nothing_is_written(hostile):
    viewer = Viewer(hostile["dir"])
    store = hostile["dir"] / ".oloproof" / "store.db"
    before = store.stat().st_mtime_ns
    try:
        from urllib.error import HTTPError

        with pytest.raises(HTTPError) as missing:
            urlopen(viewer.url + "/runs/run_NOPE", timeout=10)
        assert missing.value.code == 404
        missing.value.close()
        with pytest.raises(HTTPError) as posted:
            urlopen(viewer.url + "/", data=b"x=1", timeout=10)
        assert posted.value.code == 405
        posted.value.close()
        with urlopen(viewer.url + "/", timeout=10) as page:
            assert "script-src" not in page.headers["Content-Security-Policy"]  # no script may run at all
    finally:
        assert viewer.stop() == 0
    assert store.stat().st_mtime_ns == before


# -- in the browser ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (CHROMIUM and CHROMEDRIVER):
        message = "the browser tests need Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI installs them (.ci/run): there, a missing browser is a failure
        pytest.skip(message)
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--window-size=1280,1500",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def visit(driver, url: str, shot: str | None = None):
    """Load a page; fail on any console error; optionally save the docs' screenshot."""
    driver.get(url)
    errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert not errors, errors
    if shot:
        SHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SHOTS / f"viewer-{shot}.png"))
    return driver


def follow(driver, element, shot: str | None = None):
    """Click a link or a form's button and load the page it leads to, once the browser has left
    the current one (a click does not wait for the navigation it starts)."""
    from selenium.webdriver.support.ui import WebDriverWait

    before = driver.current_url
    element.click()
    WebDriverWait(driver, 60).until(lambda d: d.current_url != before)
    return visit(driver, driver.current_url, shot)


def cells(driver, table_id: str) -> list[list[str]]:
    from selenium.webdriver.common.by import By

    out = []
    for row in driver.find_elements(By.CSS_SELECTOR, f"#{table_id} tr")[1:]:
        out.append([c.text.strip() for c in row.find_elements(By.TAG_NAME, "td")])
    return out


@pytest.mark.browser
def test_every_page_renders_links_through_and_shows_the_run_s_numbers(browser, example):
    from selenium.webdriver.common.by import By

    viewer = Viewer(example["dir"])
    try:
        runs = visit(browser, viewer.url + "/", "runs")
        listed = [r[0] for r in cells(runs, "runs")]
        assert example["base_id"] in listed and example["cand_id"] in listed
        assert listed.index(example["cand_id"]) < listed.index(example["base_id"])  # newest first
        filtered = visit(browser, viewer.url + "/?state=DIAGNOSTIC")
        assert {r[0] for r in cells(filtered, "runs")} == set(example["children"])

        page = visit(browser, f"{viewer.url}/runs/{example['base_id']}", "run")
        browser.set_window_size(1400, 900)  # the failures are on the first screen, above the metrics
        failures = page.find_element(By.ID, "failing")
        assert failures.location["y"] + failures.size["height"] < 900 - 100, failures.location
        browser.set_window_size(1280, 1500)
        printed = {r[0]: r[1:] for r in rows(example["base"].out) if len(r) == 4}
        shown = {r[0]: r[1:4] for r in cells(page, "metrics")}
        for metric, (estimate, interval, counts) in shown.items():
            assert printed[metric] == [estimate, interval, counts], metric
        assert [r[:4] for r in cells(page, "decisions")] == [r for r in rows(example["base"].out) if len(r) == 4
                                                              and r[2] in ("PASS", "FAIL", "INSUFFICIENT_EVIDENCE")]
        assert len(page.find_elements(By.CSS_SELECTOR, "svg.plot line[stroke='#b3261e']")) >= 2  # thresholds drawn

        failed = visit(browser, f"{viewer.url}/runs/{example['base_id']}?criterion=answer_correct&status=failed")
        failing = [r[0] for r in cells(failed, "cases")]
        assert sorted(failing) == sorted(["money_back", "refund_review", "security_review", "seat_count"])

        visit(browser, f"{viewer.url}/runs/{example['base_id']}/cases/refund_review", "case")
        failed = visit(browser, f"{viewer.url}/runs/{example['base_id']}?criterion=answer_correct&status=failed")
        case = follow(browser, failed.find_element(By.LINK_TEXT, "money_back"))
        assert "Case money_back" in case.find_element(By.TAG_NAME, "h1").text
        assert case.find_elements(By.CSS_SELECTOR, "table.judgments tr")
        child_link = case.find_element(By.CSS_SELECTOR, f"a[href='/runs/{example['children'][0]}/cases/money_back']")
        assert child_link.text == "gold context"
        child = follow(browser, child_link)
        assert example["children"][0] in child.current_url and "Case money_back" in child.page_source

        diagnosis = visit(browser, f"{viewer.url}/objects/{example['diagnosis']}", "diagnosis")
        assert {r[0] for r in cells(diagnosis, "diagnosed")} == set(failing)
        comparison = visit(browser, f"{viewer.url}/objects/{example['comparison']}", "compare")
        assert "Candidate" in comparison.page_source and cells(comparison, "decisions")
        printed = {line.split(":")[0]: line.split(": ", 1)[1].split(" · ")[0]
                   for line in example["compare"].out.splitlines() if " points [" in line}
        shown = {row[0]: f"{row[1]} {row[2]}" for row in cells(comparison, "differences")}
        assert shown == printed and len(shown) == 5
    finally:
        assert viewer.stop() == 0


@pytest.mark.browser
def test_a_judge_validation_page_shows_the_validation_as_printed(browser, validated):
    viewer = Viewer(validated["dir"])
    try:
        runs = visit(browser, viewer.url + "/")
        assert validated["validation"][:23] in runs.page_source
        page = visit(browser, f"{viewer.url}/objects/{validated['validation']}", "validation")
        shown = page.find_element("id", "printed").text
        for line in validated["out"].splitlines():
            if line.startswith(("│ agreement", "│ judge pass", "│ true-positive rate", "Labels:")):
                assert line.strip() in shown, line
    finally:
        assert viewer.stop() == 0


@pytest.mark.browser
def test_the_exported_report_opens_from_disk_with_the_same_numbers(browser, example, tmp_path):
    out = tmp_path / "report.html"
    assert olo("export", example["base_id"], "--html", str(out), cwd=example["dir"]).code == 0
    page = visit(browser, out.as_uri(), "export")
    printed = {r[0]: r[1:] for r in rows(example["base"].out) if len(r) == 4}
    for row in cells(page, "metrics"):
        assert printed[row[0]] == row[1:4]
    assert "Case money_back" in page.page_source  # every case's page is in the file


@pytest.mark.browser
def test_a_hostile_case_renders_inert(browser, hostile, tmp_path):
    from selenium.webdriver.common.by import By

    viewer = Viewer(hostile["dir"])
    try:
        run = visit(browser, f"{viewer.url}/runs/{hostile['run_id']}")
        case = follow(browser, run.find_element(By.PARTIAL_LINK_TEXT, "x<script>"))
        assert json.dumps(PAYLOAD) in case.find_element(By.CSS_SELECTOR, "pre.output").text
        assert case.execute_script("return window.__xss === undefined")
        assert not case.find_elements(By.CSS_SELECTOR, "img, script, a[href^='javascript:']")
    finally:
        assert viewer.stop() == 0
    out = tmp_path / "hostile.html"
    assert olo("export", hostile["run_id"], "--html", str(out), cwd=hostile["dir"]).code == 0
    exported = visit(browser, out.as_uri())
    assert exported.execute_script("return window.__xss === undefined")
    assert not exported.find_elements(By.CSS_SELECTOR, "img, script, a[href^='javascript:']")
    assert json.dumps(PAYLOAD) in exported.find_element(By.CSS_SELECTOR, "pre.output").text


@pytest.fixture(scope="module")
def headroom(tmp_path_factory):
    """support_rag after its first run, a gold-context diagnosis and a headroom of three interventions."""
    root = tmp_path_factory.mktemp("headroom")
    assert olo("init", "--example", "support_rag", "demo", cwd=root).code == 0
    project = root / "demo"
    base_id = RUN_ID.search(olo("run", cwd=project).out).group(0)
    diag = olo("diagnose", base_id, "--intervention", "gold-context", "--criterion", "answer_correct", cwd=project)
    measured = olo("headroom", base_id, "--intervention", "gold-context", "--intervention", "top-k", "--top-k", "4",
                   "--intervention", "distractors", "--criterion", "answer_correct", "--format", "json", cwd=project)
    assert measured.code == 0, measured
    return {"dir": project, "base_id": base_id, "doc": json.loads(measured.out),
            "diagnosis": re.search(r"sha256:[0-9a-f]{64}", diag.out).group(0)}


@pytest.mark.browser
def test_the_headroom_page_draws_each_interval_and_links_the_cases_fixed_and_broken(browser, headroom):
    from selenium.webdriver.common.by import By

    doc = headroom["doc"]
    viewer = Viewer(headroom["dir"])
    try:
        runs = visit(browser, viewer.url + "/")
        runs.find_element(By.CSS_SELECTOR, f"a[href='/objects/{doc['id'].replace(':', '%3A')}']")
        diagnosis = visit(browser, f"{viewer.url}/objects/{headroom['diagnosis']}")
        # the diagnosis page links the run's headroom
        page = follow(browser, diagnosis.find_element(By.LINK_TEXT, doc["id"]), "headroom")
        assert "Headroom" in page.find_element(By.TAG_NAME, "h1").text
        shown = cells(page, "headroom")
        assert [r[1] for r in shown] == [r["label"] for r in doc["rows"]]
        for row, cells_ in zip(doc["rows"], shown):  # the numbers as the JSON and the terminal print them
            assert cells_[2:4] == [row["paired"]["display"]["difference"], row["paired"]["display"]["interval"]]
        plots = page.find_elements(By.CSS_SELECTOR, "#headroom svg.plot")
        assert len(plots) == len(doc["rows"])
        for plot, row in zip(plots, doc["rows"]):  # the interval bar spans low..high on the shared axis
            bar = plot.find_elements(By.CSS_SELECTOR, "line[stroke='#2456a6']")[0]
            low, high = float(bar.get_attribute("x1")), float(bar.get_attribute("x2"))
            assert low <= high and (low < 50 < high) == (row["paired"]["low"] < 0 < row["paired"]["high"])
        gold = doc["rows"][0]
        assert gold["label"] == "gold context" and gold["fixed"]
        fixed = page.find_element(By.CSS_SELECTOR, "#headroom tr:nth-child(2) td.fixed")
        links = [a for a in fixed.find_elements(By.TAG_NAME, "a") if a.text != "control"]
        assert [a.text for a in links] == gold["fixed"]
        case = follow(browser, links[0])
        assert f"/runs/{gold['run']}/cases/{gold['fixed'][0]}" in case.current_url
        assert f"Case {gold['fixed'][0]}" in case.find_element(By.TAG_NAME, "h1").text
        printed = visit(browser, f"{viewer.url}/objects/{doc['id']}").find_element(By.ID, "printed").text
        assert printed.startswith(f"Headroom on answer_correct: 13 cases of {headroom['base_id']}")
    finally:
        assert viewer.stop() == 0


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """10,000 cases: every seventh answered wrong, ten metadata groups."""
    project = Project(tmp_path_factory.mktemp("big"))
    project.write("app.py", """
        from oloproof import system

        @system(name="big", version="1")
        def run(input):
            return {"answer": "no" if input["n"] % 7 == 0 else "ok"}
    """)
    project.write("oloproof.yaml", """
        system:
          callable: app:run
        cases: cases.jsonl
        evaluators:
          - {type: contains, criterion: ok, field: answer, expected_field: answer}
    """)
    project.cases([{"id": f"case-{i:05d}", "input": {"n": i, "question": f"question number {i}"},
                    "expected": {"answer": "ok"}, "metadata": {"group": f"g{i % 10}"}} for i in range(10_000)])
    result = project.run("run")
    assert result.code == 0, result
    return {"dir": project.root, "run_id": RUN_ID.search(result.out).group(0)}


@pytest.mark.browser
def test_sort_filter_and_search_return_the_right_cases_of_a_10000_case_run(browser, big):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    viewer = Viewer(big["dir"])
    try:
        page = visit(browser, f"{viewer.url}/runs/{big['run_id']}")
        assert "1429 cases failing or missing ok" in page.find_element(By.ID, "failures").text
        Select(page.find_element(By.NAME, "criterion")).select_by_visible_text("ok")
        Select(page.find_element(By.NAME, "status")).select_by_visible_text("failed")
        failed = follow(browser, page.find_element(By.CSS_SELECTOR, "form.filters button"))
        assert "1429 of 10000 cases" in failed.page_source
        assert [r[0] for r in cells(failed, "cases")][:3] == ["case-00000", "case-00007", "case-00014"]
        second = follow(browser, failed.find_element(By.LINK_TEXT, "next"))
        assert [r[0] for r in cells(second, "cases")][0] == f"case-{7 * 50:05d}"

        page = visit(browser, f"{viewer.url}/runs/{big['run_id']}")
        page.find_element(By.NAME, "q").send_keys("question 4242")
        found = follow(browser, page.find_element(By.CSS_SELECTOR, "form.filters button"))
        assert [r[0] for r in cells(found, "cases")] == ["case-04242"]
        found.find_element(By.NAME, "q").clear()
        found.find_element(By.NAME, "q").send_keys("g3")  # a metadata group: 1,000 cases
        group = follow(browser, found.find_element(By.CSS_SELECTOR, "form.filters button"))
        assert "1000 of 10000 cases" in group.page_source

        page = visit(browser, f"{viewer.url}/runs/{big['run_id']}")
        page = follow(browser, page.find_element(By.CSS_SELECTOR, "#cases th a[title='sort by case']"))
        reversed_ = follow(browser, page.find_element(By.CSS_SELECTOR, "#cases th a[title='sort by case']"))  # again
        assert [r[0] for r in cells(reversed_, "cases")][:2] == ["case-09999", "case-09998"]
        by_ok = follow(browser, reversed_.find_element(By.CSS_SELECTOR, "#cases th a[title='sort by ok']"), "browse")
        shown = cells(by_ok, "cases")
        assert [r[1] for r in shown] == ["failed"] * 50 and shown[0][0] == "case-00000", "failed first"
    finally:
        assert viewer.stop() == 0


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    """Two runs of a small RAG system whose second version retrieves another document for every
    case and answers one of them wrong."""
    project = Project(tmp_path_factory.mktemp("changed"))
    project.write("app.py", """
        import os
        from oloproof import Passage, Retrieval, current_case, system

        @system(name="rag", version=os.environ.get("V", "1"), records=("retrieval/v1",))
        def run(input):
            second = os.environ.get("V") == "2"
            docs = ("blog", "faq") if second else ("faq", "policy")
            current_case().retrieval(Retrieval(query=input["q"], depth=2,
                                               candidates=tuple(Passage(doc_id=d, score=0.9 - 0.1 * n)
                                                                for n, d in enumerate(docs))))
            if second and input["q"].startswith("how long"):
                return {"answer": "Refunds are handled by the billing team."}
            return {"answer": "Refunds take 14 days from the day we receive the item."}
    """)
    project.write("oloproof.yaml", """
        system:
          callable: app:run
        cases: cases.jsonl
        evaluators:
          - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
    """)
    project.cases([{"id": "refund_time", "input": {"q": "how long do refunds take"}, "expected": {"answer": "14 days"}},
                   {"id": "refund_rule", "input": {"q": "can I get a refund"}, "expected": {"answer": "14 days"}}])
    first = RUN_ID.search(project.run("run").out).group(0)
    second = RUN_ID.search(project.run("run", env={"V": "2"}).out).group(0)
    return {"dir": project.root, "first": first, "second": second}


@pytest.mark.browser
def test_the_compare_form_opens_the_side_by_side_diff_of_a_changed_case(browser, changed):
    from selenium.webdriver.common.by import By

    viewer = Viewer(changed["dir"])
    try:
        runs = visit(browser, viewer.url + "/")
        for box in runs.find_elements(By.CSS_SELECTOR, "#compare-form input[type=checkbox]"):
            box.click()
        pair = follow(browser, runs.find_element(By.CSS_SELECTOR, "#compare-form button[type=submit]"), "pair")
        assert "/compare?" in pair.current_url
        assert changed["second"] in pair.find_element(By.CSS_SELECTOR, "div.side p").text, "the newer run is the candidate"
        case = pair.find_element(By.ID, "pair-refund_time")
        assert "broken" in case.find_element(By.TAG_NAME, "h3").text
        deleted = [e.text for e in case.find_elements(By.TAG_NAME, "del")]
        inserted = [e.text for e in case.find_elements(By.TAG_NAME, "ins")]
        assert any("14 days" in d for d in deleted) and any("billing team" in i for i in inserted)
        retrievals = [[r[1] for r in cells_of(t)] for t in case.find_elements(By.CSS_SELECTOR, "table.retrieval")]
        assert retrievals == [["faq", "policy"], ["blog", "faq"]]
        verdicts = cells_of(case.find_element(By.CSS_SELECTOR, "table.verdicts"))
        assert verdicts == [["answer_correct", "passed", "", "failed", "expected_text_not_found"]]
        assert not pair.find_elements(By.ID, "pair-refund_rule"), "same output and verdict: not a changed case"
        fixed = follow(browser, pair.find_element(By.PARTIAL_LINK_TEXT, "fixed"))
        assert not fixed.find_elements(By.ID, "pair-refund_time")
    finally:
        assert viewer.stop() == 0


def cells_of(table) -> list[list[str]]:
    from selenium.webdriver.common.by import By

    return [[c.text.strip() for c in row.find_elements(By.TAG_NAME, "td")]
            for row in table.find_elements(By.TAG_NAME, "tr")[1:]]


@pytest.mark.browser
def test_the_suite_page_draws_the_trend_of_each_metric(browser, example):
    from selenium.webdriver.common.by import By

    viewer = Viewer(example["dir"])
    try:
        runs = visit(browser, viewer.url + "/")
        suite = follow(browser, runs.find_element(By.CSS_SELECTOR, "a.suite"), "suite")
        chart = suite.find_element(By.ID, "trend-answer_correct")
        assert len(chart.find_elements(By.CSS_SELECTOR, "circle.estimate")) == 2
        assert len(chart.find_elements(By.CSS_SELECTOR, "line.interval")) == 2
        assert chart.find_elements(By.CSS_SELECTOR, "line.threshold")
        ticks = [t.text for t in chart.find_elements(By.CSS_SELECTOR, "text.tick")]
        assert ticks == ["0", "0.25", "0.5", "0.75", "1"]
        listed = [r[1] for r in cells_of(chart.find_element(By.CSS_SELECTOR, "table.trend-table"))]
        assert listed == [example["base_id"], example["cand_id"]]
    finally:
        assert viewer.stop() == 0


@pytest.fixture(scope="module")
def conversations(tmp_path_factory):
    """A staged assistant's run of conversations (tests/chat_project.py)."""
    from chat_project import chat_project

    project = chat_project(tmp_path_factory.mktemp("conversations"))
    result = project.run("run")
    assert result.code == 0, result
    return {"dir": project.root, "run_id": RUN_ID.search(result.out).group(0)}


@pytest.mark.browser
def test_a_conversation_reads_as_a_transcript_from_the_run_page(browser, conversations, tmp_path):
    from chat_project import HOSTILE
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    viewer = Viewer(conversations["dir"])
    try:
        run = visit(browser, f"{viewer.url}/runs/{conversations['run_id']}")
        field = run.find_element(By.NAME, "conversation")  # the run page's filter to one conversation
        field.send_keys("refund-annual")
        before = browser.current_url
        field.submit()  # as a click, it does not wait for the navigation it starts (follow)
        WebDriverWait(browser, 60).until(lambda d: d.current_url != before)
        narrowed = visit(browser, browser.current_url)
        assert [r[0] for r in cells(narrowed, "cases")] == ["refund-annual#1", "refund-annual#2", "refund-annual#3"]
        case = follow(browser, narrowed.find_element(By.LINK_TEXT, "refund-annual#2"), "conversation")
        shown = case.find_elements(By.CSS_SELECTOR, "ol.transcript > li")
        assert len(shown) == 3
        assert [li.get_attribute("class") for li in shown] == ["turn", "turn current", "turn"]
        assert "And for annual plans?" in shown[1].text and "pro rata" in shown[1].text
        assert "searched for: How do I get a refund? And for annual plans?" in shown[1].text
        assert shown[2].find_element(By.CSS_SELECTOR, "table.turn-judgments td.failed").text == "failed"
        rows = [[c.text for c in tr.find_elements(By.TAG_NAME, "td")]
                for tr in shown[1].find_elements(By.CSS_SELECTOR, "table.turn-retrieval tr")[1:]]
        assert rows[0][2:6] == ["kb-annual", "", "✓ doc", "kept"]
        # the current turn is set apart where a reader sees it, not only in the markup
        marked = shown[1].value_of_css_property("border-left-color")
        assert marked != shown[0].value_of_css_property("border-left-color")
        third = follow(browser, shown[2].find_element(By.LINK_TEXT, "Turn 3"))
        assert "Case refund-annual#3" in third.find_element(By.TAG_NAME, "h1").text
        assert third.find_element(By.CSS_SELECTOR, "ol.transcript > li.current").text.startswith("Turn 3")

        hostile = visit(browser, f"{viewer.url}/runs/{conversations['run_id']}/cases/{quote(HOSTILE + '#2', safe='')}")
        assert len(hostile.find_elements(By.CSS_SELECTOR, "ol.transcript > li")) == 2
        assert hostile.execute_script("return window.__xss === undefined")
        assert not hostile.find_elements(By.CSS_SELECTOR, "img, script, a[href^='javascript:']")
    finally:
        assert viewer.stop() == 0
    out = tmp_path / "conversations.html"
    assert olo("export", conversations["run_id"], "--html", str(out), cwd=conversations["dir"]).code == 0
    exported = visit(browser, out.as_uri())
    assert exported.execute_script("return window.__xss === undefined")
    assert not exported.find_elements(By.CSS_SELECTOR, "img, script, a[href^='javascript:']")
    exported.find_element(By.CSS_SELECTOR, "a[href='#case-refund-annual%233']").click()  # a turn's anchor in the file
    assert browser.current_url.endswith("#case-refund-annual%233")
