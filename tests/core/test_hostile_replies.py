"""The fault-injection triggers through the real command line on both stores: a judge's provider
(the stand-in, tests/provider_standin.py HOSTILE) and a system's HTTP service (tests/hostile.py
TRIGGERS) answer with a lone surrogate, a reply cut mid-emoji, NaN, 1e400, 100,000-deep nesting,
a duplicate key, control characters, ESC and <script>. Each costs its own case at most: the run is
stored, the other cases are intact, every output format parses and no terminal line carries ESC."""

from __future__ import annotations

import json

import pytest
from conftest import APP, CONFIG, Project
from hostile import STORES, TRIGGERS, http_config, olo_env, on_store, records, run_id, serve, standin_judge
from provider_standin import HOSTILE, StandIn

REPORTS = ("--junit", "junit.xml", "--junit-cases", "--json", "results.json", "--markdown", "summary.md")


def outputs_parse(project: Project, run: str) -> None:
    import html.parser
    import xml.etree.ElementTree as ET

    ET.parse(project.root / "junit.xml")
    json.loads((project.root / "results.json").read_text(encoding="utf-8"))
    markdown = (project.root / "summary.md").read_text(encoding="utf-8")
    assert "<script>" not in markdown and "\x1b" not in markdown
    exported = olo_env(project, "export", run, "--html", "report.html")
    assert exported.code == 0, exported
    page = (project.root / "report.html").read_text(encoding="utf-8")
    html.parser.HTMLParser().feed(page)
    assert "<script>alert(1)" not in page
    for args in (("inspect", run, "--failures"), ("runs",), ("inspect", run, "--format", "json")):
        shown = olo_env(project, *args)
        assert shown.code == 0 and "Traceback" not in shown.text and "\x1b" not in shown.text, (args, shown)
    assert olo_env(project, "store", "check").code == 0


@pytest.mark.parametrize("kind", STORES)
def test_a_hostile_judge_reply_costs_its_own_judgment_only(tmp_path, request, kind):
    cases = [{"id": f"t_{name}", "input": {"q": f"TRIGGER-{name} answer"}, "expected": {"answer": "answer"}}
             for name in HOSTILE]
    cases += [{"id": f"ok{i}", "input": {"q": f"fine answer {i}"}, "expected": {"answer": "answer"}} for i in range(4)]
    with StandIn() as standin:
        standin.rules += [(f"TRIGGER-{name}", fault) for name, fault in HOSTILE.items()]
        project = Project(tmp_path)
        project.write("app.py", APP)
        project.write("oloproof.yaml", CONFIG.replace("cases.jsonl", "cases.jsonl\nconcurrency: 4")
                      + standin_judge(standin.openai_url))
        project.cases(cases)
        on_store(request, project, kind)
        first = olo_env(project, "run", *REPORTS)
        assert first.code == 0 and "Traceback" not in first.text, first
        assert "\x1b" not in first.text
        run = run_id(first)
        got = {k: v["judgments"]["helpful"] for k, v in records(project, run).items()}
        for i in range(4):
            assert got[f"ok{i}"]["status"] == "pass", got[f"ok{i}"]
        # a lone surrogate beside the verdict is read past; one in the verdict is kept escaped, and noted
        assert got["t_surrogate"]["status"] == "pass" and got["t_surrogate"]["detail"]["rationale"] == "kept"
        cut = got["t_cut_emoji"]
        assert cut["status"] == "pass" and cut["detail"]["rationale"] == "cut in an emoji \\ud83d", cut
        assert cut["detail"]["escaped"] == ["$.detail.rationale"]
        # control characters and markup are text: kept as given, escaped by every output
        assert got["t_control"]["status"] == "pass" and "<script>" in got["t_control"]["detail"]["rationale"]
        # what is not strict JSON is that judgment's provider error, never the run's
        for name in ("cut_bytes", "nan", "overflow", "deep", "duplicate"):
            judged = got[f"t_{name}"]
            assert judged["status"] == "missing" and judged["reason"].startswith("provider_error: invalid_json"), \
                (name, judged)
        outputs_parse(project, run)
        paid = len(standin.requests)
        again = olo_env(project, "run")  # the kept judgments were cached: only the refused ones are asked again
        assert again.code == 0, again
        asked = sorted(p.split("TRIGGER-")[1].split()[0] for p in standin.prompts()[paid:] if "TRIGGER-" in p)
        assert asked == ["cut_bytes", "deep", "duplicate", "nan", "overflow"], standin.prompts()[paid:]
    # the 7 kept rubric judgments from the cache; the 5 refused asked again, the 12 contains made again (not cached)
    assert "judgment 7 hit/17 miss" in again.out, again.out


@pytest.mark.parametrize("kind", STORES)
def test_a_hostile_service_body_costs_its_own_case_only(tmp_path, request, kind):
    served = serve(TRIGGERS)
    try:
        project = Project(tmp_path)
        project.write("oloproof.yaml", http_config(served.url))
        project.cases([{"id": k, "input": {"k": k}, "expected": {"answer": "ok"}} for k in ["fine", *TRIGGERS]])
        on_store(request, project, kind)
        result = olo_env(project, "run", *REPORTS)
        assert result.code == 0 and "Traceback" not in result.text and "\x1b" not in result.text, result
        run = run_id(result)
        got = records(project, run)
        outputs_parse(project, run)
    finally:
        served.stop()
    assert "missing" not in got["fine"] and got["fine"]["judgments"]["answer_correct"]["status"] == "pass"
    for name in ("surrogate", "cut_emoji"):
        assert got[name]["escaped"] == ["$.output.answer"] and got[name]["output"]["answer"].startswith("ok"), got[name]
        assert got[name]["judgments"]["answer_correct"]["status"] == "pass"
    assert got["control"]["output"]["answer"].startswith("ok \x1b[2J") and "<script>" in got["control"]["output"]["answer"]
    for name in ("cut_bytes", "nan", "overflow", "deep", "duplicate"):
        assert got[name]["missing"].startswith("invalid_json"), (name, got[name])
        assert served.server.attempts[name] == 3, name  # retried, as any 2xx that is not JSON
