"""The URLs a page links to: the served viewer's, and those inside one exported file (where
what the file does not hold is plain text, never a dead anchor)."""

from __future__ import annotations

from urllib.parse import quote, urlencode


class ServedLinks:
    """URLs of the served viewer."""

    def home(self) -> str:
        return "/"

    def run(self, run_id: str) -> str:
        return f"/runs/{quote(run_id, safe='')}"

    def case(self, run_id: str, case_id: str) -> str:
        return f"/runs/{quote(run_id, safe='')}/cases/{quote(case_id, safe='')}"

    def object(self, object_id: str) -> str:
        return f"/objects/{quote(object_id, safe='')}"

    def conversation(self, run_id: str, conversation: str) -> str:
        """The run's cases table narrowed to one conversation's turns."""
        return f"{self.run(run_id)}?{urlencode({'conversation': conversation})}"

    def page(self, cases: dict, page: int) -> str:
        query = {k: v for k, v in cases["filters"].items() if v}
        return "?" + urlencode({**query, "page": page})

    def sort(self, cases: dict, column: str) -> str:
        """The cases table sorted by ``column``; the same column again reverses the order."""
        query = {k: v for k, v in cases["filters"].items() if v and k not in ("sort", "desc")}
        again = cases["filters"]["sort"] == column and not cases["filters"]["desc"]
        return "?" + urlencode({**query, "sort": column, **({"desc": "1"} if again else {})})

    def compare(self, candidate: str, baseline: str) -> str:
        return "/compare?" + urlencode([("run", candidate), ("run", baseline)])

    def suite(self, system: str, config: str | None) -> str:
        return "/suite?" + urlencode({"system": system, "config": config or ""})


class ExportLinks:
    """Links inside one exported file: the cases it holds are anchors, the rest plain text ids."""

    def __init__(self, runs_inside: set[str]):
        self.runs_inside = runs_inside

    def home(self) -> str:
        return "#"

    def run(self, run_id: str) -> str | None:
        return "#" if run_id in self.runs_inside else None

    def case(self, run_id: str, case_id: str) -> str | None:
        return f"#case-{quote(case_id, safe='')}" if run_id in self.runs_inside else None

    def object(self, object_id: str) -> str | None:
        return None

    def conversation(self, run_id: str, conversation: str) -> None:
        return None  # the file's cases table is not filtered: each turn is an anchor of its own

    def page(self, cases: dict, page: int) -> str:
        return "#"

    def sort(self, cases: dict, column: str) -> None:
        return None

    def compare(self, candidate: str, baseline: str) -> None:
        return None

    def suite(self, system: str, config: str | None) -> None:
        return None
