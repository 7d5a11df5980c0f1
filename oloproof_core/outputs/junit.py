"""JUnit XML from a run's or a comparison's view, in the form Jenkins and GitLab read.

Written with the standard library's ``xml.etree.ElementTree``: the format is a handful of
elements, and ElementTree escapes text and attributes correctly, so a dependency would add
nothing. The shape (``testsuites`` > ``testsuite`` > ``testcase`` with ``failure``, ``error`` or
``skipped``) is the one the common JUnit schema describes.

One test case a policy rule: PASS passes; FAIL, INSUFFICIENT_EVIDENCE and MANUAL_REVIEW fail when
``block_on`` blocks on them and are skipped otherwise; a rule left undecided by an interrupted run
is an error. ``cases=True`` adds a suite with one test case a case x criterion.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from oloproof_core.config.files import Spool
from oloproof_core.results.view import RUN_FORMAT, case_criteria


def _rule_message(view: Mapping[str, Any], d: Mapping[str, Any]) -> str:
    """``INSUFFICIENT_EVIDENCE (interval_overlaps_threshold): answer_correct 69.2% [38.5%, 91.0%] · 9 / 13 ...``."""
    head = f"{d['verdict'] or 'UNDECIDED'} ({d['reason']}); rule {d['description']}"
    if view["format"] == RUN_FORMAT:
        m = next((m for m in view["metrics"] if m["name"] == d["metric"]), None)
        if m is None:
            return head
        shown = m["display"]
        return f"{head}; {d['metric']} {shown['estimate']} {shown['interval']} · {shown['counts']}"
    m = next(m for m in view["metrics"] if m["name"] == d["metric"])
    shown = m["display"] or {"difference": "no paired observations", "interval": None}
    interval = f" {shown['interval']}" if shown["interval"] else ""
    tail = f"; {d['planning']}" if d.get("planning") else ""
    return (f"{head}; {d['metric']} {shown['difference']}{interval} · {m['paired']} paired · "
            f"{m['missing']} missing · {m['excluded']} excluded{tail}")


def _case(suite: ET.Element, name: str, classname: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", {"name": name, "classname": classname})


def _finish(suite: ET.Element) -> ET.Element:
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    for tag, attribute in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        suite.set(attribute, str(sum(1 for c in cases if c.find(tag) is not None)))
    return suite


def _rules_suite(view: Mapping[str, Any], name: str, timestamp: str | None) -> ET.Element:
    suite = ET.Element("testsuite", {"name": name})
    if timestamp:
        suite.set("timestamp", timestamp.removesuffix("Z"))
    properties = ET.SubElement(suite, "properties")
    gate = view["gate"]
    for key, value in (("gate", gate["verdict"] or "none"), ("exit_code", view["exit_code"]),
                       ("block_on", ",".join(gate["block_on"])), ("confidence_level", view["confidence_level"])):
        ET.SubElement(properties, "property", {"name": key, "value": str(value)})
    for d in view["decisions"]:
        case = _case(suite, f"{d['rule']} ({d['metric']})", name)
        message = _rule_message(view, d)
        if d["outcome"] == "failed":
            ET.SubElement(case, "failure", {"message": message, "type": d["verdict"]}).text = message
        elif d["outcome"] == "skipped":
            ET.SubElement(case, "skipped", {"message": f"not blocking: {message}"})
        elif d["outcome"] == "undecided":
            ET.SubElement(case, "error", {"message": message, "type": "INTERRUPTED"}).text = (
                "the run was interrupted before the gate was decided")
        else:
            ET.SubElement(case, "system-out").text = message
    if view["format"] == RUN_FORMAT and view["missing"]["cases"]:
        reasons = "; ".join(f"{r['reason']} ({r['cases']})" for r in view["missing"]["reasons"])
        ET.SubElement(suite, "system-err").text = (f"{view['missing']['cases']} of {view['run']['cases']} "
                                                   f"cases produced no output: {reasons}")
    return _finish(suite)


def _case_element(name: str, case_id: str, criterion: str, judgment: Mapping[str, Any],
                  missing: str | None) -> ET.Element:
    """One case x criterion as a test case: a failure, an error (missing), skipped (excluded), a score."""
    case = ET.Element("testcase", {"name": f"{case_id} · {criterion}", "classname": name})
    status, reason = judgment["status"], judgment.get("reason")
    if status == "fail":
        message = f"{criterion} failed" + (f": {reason}" if reason else "")
        ET.SubElement(case, "failure", {"message": message, "type": "fail"}).text = message
    elif status == "missing":
        message = f"no judgment: {missing or reason}"
        ET.SubElement(case, "error", {"message": message, "type": "missing"}).text = message
    elif status == "excluded":
        ET.SubElement(case, "skipped", {"message": f"excluded: {reason}"})
    elif status == "score":
        ET.SubElement(case, "system-out").text = f"score {judgment['value']:.3f}"
    claims = claim_lines(judgment)
    if claims:  # a claim-level judge's verdicts, one line a claim
        out = case.find("system-out")
        if out is None:
            out = ET.SubElement(case, "system-out")
        out.text = "\n".join(([out.text] if out.text else []) + claims)
    return case


def claim_lines(judgment: Mapping[str, Any]) -> list[str]:
    """A claim-level judgment's claims, one line each: ``supported (kb-03): <claim>``."""
    detail = judgment.get("detail") or {}
    claims = detail.get("claims")
    if not isinstance(claims, list) or not claims:
        return []
    lines = [str(detail.get("summary") or "")] if detail.get("summary") else []
    for c in claims:
        if isinstance(c, Mapping):
            where = f" ({c['passage']})" if c.get("passage") else ""
            lines.append(xml_safe(f"{c.get('verdict')}{where}: {c.get('claim')}"))
    return lines


PLACE = "oloproof.cases.placeholder"  # where the spooled test cases go in the serialised document


def _cases_suite(name: str, records: Iterable[Mapping[str, Any]]) -> tuple[ET.Element, Spool | None]:
    """The case x criterion suite: its element, counted while ``records`` stream past, and its test
    cases serialised (as ``ET.indent`` lays them out) into a spool; None when it has none."""
    suite = ET.Element("testsuite", {"name": name})
    spool, counts = Spool(), {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for case_id, criterion, judgment, missing, conversation in case_criteria(records):
        # a conversation's turn: its class is the conversation, its name the turn case's id (docs/conversations.md)
        case = _case_element(conversation or name, case_id, criterion, judgment, missing)
        counts["tests"] += 1
        for tag, attribute in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            counts[attribute] += case.find(tag) is not None
        ET.indent(case, level=2)
        spool.write(("    " + ET.tostring(case, encoding="unicode")).split("\n"))
    for attribute, count in counts.items():
        suite.set(attribute, str(count))
    if not counts["tests"]:
        list(spool)  # closes it
        return suite, None
    ET.SubElement(suite, "testcase", {"name": PLACE})
    return suite, spool


def render_junit(view: Mapping[str, Any], records: Iterable[Mapping[str, Any]] | None = None) -> str:
    """The JUnit XML document; ``records`` (a run's case records) adds the case x criterion suite."""
    return "".join(junit_chunks(view, records))


# what XML 1.0 forbids in a document (C0 but tab, LF and CR; lone surrogates; U+FFFE, U+FFFF):
# ElementTree writes them as they are, and a reader then refuses the whole file
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """``text`` with every character XML 1.0 forbids shown as its escape (``\\x1b``), as text."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text)


def junit_chunks(view: Mapping[str, Any], records: Iterable[Mapping[str, Any]] | None = None) -> Iterator[str]:
    """:func:`render_junit` in pieces, each :func:`xml_safe` (a message may hold a colour code)."""
    return (xml_safe(chunk) for chunk in _chunks(view, records))


def _chunks(view: Mapping[str, Any], records: Iterable[Mapping[str, Any]] | None = None) -> Iterator[str]:
    """``records`` stream past once, their test cases are spooled, and the document is written
    around them (its head carries their counts)."""
    if view["format"] == RUN_FORMAT:
        name, timestamp = f"oloproof run {view['run']['id']}", view["run"]["created"]
    else:
        name, timestamp = f"oloproof compare {view['candidate']['id']} {view['baseline']['id']}", None
    root = ET.Element("testsuites", {"name": name})
    suites = [_rules_suite(view, "oloproof.gate" if view["format"] == RUN_FORMAT else "oloproof.compare", timestamp)]
    spool = None
    if records is not None:
        suite, spool = _cases_suite("oloproof.cases", records)
        suites.append(suite)
    root.extend(suites)
    for attribute in ("tests", "failures", "errors"):  # the common schema has no skipped count here
        root.set(attribute, str(sum(int(s.get(attribute)) for s in suites)))
    ET.indent(root)
    text = '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
    if spool is None:
        yield text
        return
    place = f'    <testcase name="{PLACE}" />'
    head, tail = text.split(place + "\n")
    yield head
    for line in spool:
        yield line + "\n"
    yield tail
