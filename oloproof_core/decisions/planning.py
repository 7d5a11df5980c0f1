"""Planning a comparison: how many paired cases a non-inferiority rule would need to decide."""

from __future__ import annotations

from array import array
from typing import Any

from oloproof_core.statistics import intervals as stats

PLANNING_LIMIT = 100_000


def plan(p: Any, margin: float, confidence: float) -> dict | None:
    """How many more pairs would decide the rule if the observed difference and discordance held.

    :param margin: the boundary as ``-margin`` (a fraction), as :func:`stats.planning_total` takes it.
    :return: ``{"paired", "total", "discordance", "limit", "power"}`` (``total`` None: no total up to
        ``limit`` decides it; ``discordance`` in whole percent; ``power``: the power-based figures of
        :func:`power.pilot_power`, the total that decides it 80% of the time), graded differences' figures
        (:func:`_graded_planning`), or None when no pair differs (nothing to scale).
    """
    counts = p.discordant
    if counts is None:  # graded differences (trial means, cluster means, scores)
        return _graded_planning(p, margin, confidence)
    if sum(counts) == 0:
        return None
    b, c = counts
    from oloproof_core.statistics.power import pilot_power

    return {"paired": p.n, "total": stats.planning_total(b, c, p.n, margin, confidence, limit=PLANNING_LIMIT),
            "discordance": int(stats.round_half_up(100 * (b + c) / p.n, 0)), "limit": PLANNING_LIMIT,
            "power": pilot_power(b, c, p.n, margin, confidence, limit=PLANNING_LIMIT)}


def _graded_planning(p: Any, margin: float, confidence: float) -> dict | None:
    """The planning figures of differences that are not all -1, 0 or +1 (:func:`units.planning_total`):
    ``{"paired", "total", "limit", "graded": True, "unit"}``."""
    from oloproof_core.statistics.units import planning_total

    differences = array("d", (x - y for x, y in zip(p.candidate, p.baseline)))
    if not differences or not any(differences):
        return None
    total = planning_total(differences, margin, confidence, limit=PLANNING_LIMIT)
    return {"paired": p.n, "total": total, "limit": PLANNING_LIMIT, "graded": True, "unit": p.unit}
