"""The viewer's labelling page (`oloproof label RUN_ID`): the only write path of the viewer.

Refusals are checked over plain HTTP (a POST without the token, from another Origin, with another
Host, to another path); the browser test labels 10 planned cases of the judges example in Debian's
headless Chromium, and the next `oloproof run` decides the judge rule on the human-level interval.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode, urlparse

import pytest

from test_viewer import browser  # noqa: F401 - the module's Chromium fixture


def olo(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "oloproof", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


class LabelPage:
    def __init__(self, cwd: Path):
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "oloproof", "label", "latest", "--no-open",
                                      "--labeller", "browser test"], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/label", line)
        assert found, (line, self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.url, self.port = found.group(0), int(found.group(1))

    def request(self, method: str, path: str, body: dict | None = None, host: str | None = None,
                origin: str | None = "self") -> tuple[int, str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = {"Host": host or f"127.0.0.1:{self.port}"}
        if origin is not None:
            headers["Origin"] = f"http://127.0.0.1:{self.port}" if origin == "self" else origin
        data = None
        if body is not None:
            data = urlencode(body)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        text = response.read().decode()
        connection.close()
        return response.status, text

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        finally:
            self.proc.stdout.close()
            self.proc.stderr.close()


def _truth(case: dict) -> bool:
    topic, variant = case["input"]["topic"], case["input"]["variant"]
    wrong = {"refunds": 1, "seats": 0, "export": 1, "sso": 0, "trial": 1}
    return topic == "hours" or variant % 2 != wrong[topic]


@pytest.fixture
def planned(tmp_path):
    assert olo("init", "--example", "judges", "demo", cwd=tmp_path).returncode == 0
    demo = tmp_path / "demo"
    assert olo("run", cwd=demo).returncode == 3
    plan = olo("label", "plan", "latest", "--count", "10", cwd=demo)
    assert "planned: 10 cases to label (7 judge passes, 3 judge fails)" in plan.stdout, plan.stdout + plan.stderr
    return demo


def _stored(demo: Path) -> list[dict]:
    assert olo("label", "export", "out.jsonl", cwd=demo).returncode == 0
    return [json.loads(line) for line in (demo / "out.jsonl").read_text().splitlines()]


def test_only_a_post_with_the_token_from_the_page_s_origin_and_host_writes(planned):
    page = LabelPage(planned)
    try:
        status, html = page.request("GET", "/label")
        assert status == 200
        token = re.search(r'name="token" value="([^"]+)"', html).group(1)
        case = re.search(r'name="case" value="([^"]+)"', html).group(1)
        assert 'id="judge-verdict"' not in html  # the judge's verdict is hidden until answered
        good = {"token": token, "case": case, "verdict": "pass", "note": ""}
        assert page.request("POST", "/label", {**good, "token": ""})[0] == 403
        assert page.request("POST", "/label", {k: v for k, v in good.items() if k != "token"})[0] == 403
        assert page.request("POST", "/label", {**good, "token": token[:-1] + "x"})[0] == 403
        assert page.request("POST", "/label", good, origin="http://evil.example")[0] == 403
        assert page.request("POST", "/label", good, origin=None)[0] == 403
        assert page.request("POST", "/label", good, host="evil.example")[0] == 403
        assert page.request("GET", "/label", host=f"evil.example:{page.port}")[0] == 403
        assert page.request("POST", "/", good)[0] == 405
        assert page.request("POST", "/anything", good)[0] == 404
        assert page.request("POST", "/label", {**good, "case": "not-planned"})[0] == 400
        assert _stored(planned) == []
        status, _ = page.request("POST", "/label", good)
        assert status == 303
        rows = _stored(planned)
        assert [(r["case"], r["verdict"], r["labeller"]) for r in rows] == [(case, "pass", "browser test")]
        status, html = page.request("GET", f"/label?answered={case}")
        assert 'id="judge-verdict"' in html  # now shown, for the case just answered
    finally:
        page.stop()


@pytest.mark.browser
def test_ten_planned_cases_labelled_in_the_browser_decide_the_rule_at_the_human_level(browser, planned):  # noqa: F811
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    cases = {json.loads(line)["id"]: json.loads(line) for line in (planned / "cases.jsonl").read_text().splitlines()}
    page = LabelPage(planned)
    try:
        browser.get(page.url)
        for i in range(10):
            case = browser.find_element(By.ID, "case-id").text
            assert not browser.find_elements(By.CSS_SELECTOR, "#label-form #judge-verdict")
            assert browser.find_element(By.ID, "answer").text and browser.find_element(By.ID, "question").text
            if i == 0:
                browser.find_element(By.NAME, "note").send_keys("first one")
            browser.find_element(By.ID, "pass" if _truth(cases[case]) else "fail").click()
            answered = WebDriverWait(browser, 15, ignored_exceptions=(NoSuchElementException,
                                                                     StaleElementReferenceException)).until(
                lambda b, case=case: case in b.find_element(By.ID, "answered").text
                and b.find_element(By.ID, "answered").text)  # the next page, once the browser has loaded it
            assert case in answered and "The judge said" in answered
            assert urlparse(browser.current_url).path == "/label"
        assert browser.find_element(By.ID, "done")
        errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert not errors, errors
    finally:
        page.stop()
    rows = _stored(planned)
    assert len(rows) == 10 and [r["note"] for r in rows if r["note"]] == ["first one"]
    run = olo("run", cwd=planned)
    assert "Human level: the pass rate people would give" in run.stdout, run.stdout
    assert "10 labels (7 of 40 judge passes, 3 of 20 judge fails)" in run.stdout
    assert "Rule grounded-floor decides on grounded human-level, from 10 labels" in run.stdout
    assert "judge_not_validated" not in run.stdout
