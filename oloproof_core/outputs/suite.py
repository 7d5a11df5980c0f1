"""The suite page's data: each metric's estimate and interval across the runs of one suite (the
same system name and config file; a diagnosis's child runs are not the suite's runs), oldest
first, placed on a chart whose geometry is computed here, so the page draws it as SVG with no
script: a value axis with ticks, a point and an interval bar per run, and the latest run's
thresholds as lines."""

from __future__ import annotations

from typing import Any

WIDTH, HEIGHT = 640.0, 180.0  # the chart's viewBox
LEFT, RIGHT, TOP, BOTTOM = 48.0, 12.0, 10.0, 26.0  # room for the axis labels
TICKS = 5


def _range(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if lo >= 0.0 and hi <= 1.0:
        return 0.0, 1.0  # a proportion or a bounded score: the whole scale
    pad = (hi - lo) * 0.05 or abs(hi) * 0.05 or 1.0
    return lo - pad, hi + pad


def chart(points: list[dict], thresholds: list[dict]) -> dict:
    """Positions on the viewBox for ``points`` (``value``, ``low``, ``high``; None when the run
    has no estimate) and ``thresholds`` (``value``): the y axis's ticks, each point's x, y and
    bar, each threshold's y."""
    known = [v for p in points for v in (p["value"], p["low"], p["high"]) if isinstance(v, (int, float))]
    known += [t["value"] for t in thresholds if isinstance(t["value"], (int, float))]
    lo, hi = _range(known or [0.0, 1.0])
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def y(v: float) -> float:
        return round(TOP + inner_h * (1 - (v - lo) / (hi - lo)), 2)

    step = inner_w / max(1, len(points))
    placed = []
    for n, p in enumerate(points):
        x = round(LEFT + step * (n + 0.5), 2)
        has = isinstance(p["value"], (int, float))
        bar = isinstance(p["low"], (int, float)) and isinstance(p["high"], (int, float))
        placed.append({**p, "x": x, "y": y(p["value"]) if has else None,
                       "y_low": y(p["low"]) if bar else None, "y_high": y(p["high"]) if bar else None})
    ticks = [{"y": y(lo + (hi - lo) * i / (TICKS - 1)), "label": f"{lo + (hi - lo) * i / (TICKS - 1):.3g}"}
             for i in range(TICKS)]
    return {"width": WIDTH, "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT, "top": TOP,
            "bottom": HEIGHT - BOTTOM, "ticks": ticks, "points": placed,
            "thresholds": [{**t, "y": y(t["value"])} for t in thresholds if isinstance(t["value"], (int, float))]}


def suite_view(store: Any, system: str, config: str | None) -> dict:
    """The runs of one suite (system name, config file), oldest first, and a chart per metric."""
    from oloproof_core.model.errors import ConfigError
    from oloproof_core.results.view import run_view as run_document

    headers = [h for h in store.list_runs() if not h.get("parent") and h["system"]["name"] == system
               and (h.get("config") or "") == (config or "")]
    if not headers:
        raise ConfigError(f"no run of system {system!r} with config {config!r}", fix="pick a suite from the runs page")
    summaries = {h["id"]: store.get_run(h["id"])[1] for h in headers}
    names = list(dict.fromkeys(n for h in headers for n in summaries[h["id"]].get("metrics", {})))
    latest = headers[-1]
    decisions = run_document(latest, summaries[latest["id"]], [])["decisions"]
    charts = []
    for name in names:
        points = []
        for n, header in enumerate(headers, 1):
            m = summaries[header["id"]].get("metrics", {}).get(name) or {}
            cells = m.get("cells") or ["", "", ""]
            points.append({"run": header["id"], "n": n, "created": header.get("created"), "value": m.get("value"),
                           "low": m.get("low"), "high": m.get("high"), "estimate": cells[0], "interval": cells[1],
                           "gate": summaries[header["id"]].get("gate")})
        thresholds = [{"rule": d["rule"], "kind": kind, "value": d["threshold"][kind]} for d in decisions
                      if d["metric"] == name for kind in ("min", "max") if kind in (d.get("threshold") or {})]
        charts.append({"metric": name, "chart": chart(points, thresholds)})
    return {"system": system, "config": config, "runs": headers, "charts": charts}
