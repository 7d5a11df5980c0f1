"""How estimates print: the metric table's cells, with intervals rounded outward.

Every estimate is rounded to nearest with ties away from zero (1/16 shows 6.3%): proportions from
their exact counts, other values from their shortest decimal form. Bounds are rounded outward.
"""

from __future__ import annotations

from typing import Any

from oloproof_core.statistics import intervals as stats
from collections.abc import Sequence


def fixed(x: float, places: int, sign: bool = False) -> str:
    """``x`` to ``places`` decimals, ties away from zero (``0.6925`` -> ``0.693``); never ``-0.0``."""
    rounded = stats.round_half_up(x, places) + 0.0  # + 0.0 turns -0.0 into 0.0
    return f"{rounded:+.{places}f}" if sign else f"{rounded:.{places}f}"


def percent_of(k: int, n: int) -> str:
    """``k / n`` as a percentage to 0.1, ties away from zero, in exact integer arithmetic (1/16 -> 6.3%)."""
    tenths = (2000 * k + n) // (2 * n)  # floor(1000·k/n + 1/2) for 0 <= k <= n
    return f"{tenths // 10}.{tenths % 10}%"


def percent(fraction: float) -> str:
    """A fraction as a percentage to 0.1, ties away from zero (``0.6925`` -> ``69.3%``)."""
    return fixed(100 * fraction, 1) + "%"


def percent_bounds(low: float, high: float) -> str:
    """``[38.5%, 91.0%]``: the bounds rounded outward to 0.1%."""
    return f"[{stats.floor_to(100 * low, 1):.1f}%, {stats.ceil_to(100 * high, 1):.1f}%]"


def _tail(missing: int, excluded: int) -> str:
    return f"{missing} missing · {excluded} excluded"


def proportion_cells(k: int, n: int, low: float, high: float, missing: int, excluded: int) -> tuple[str, str, str]:
    """``69.2%``, ``[38.5%, 91.0%]``, ``9 / 13 observed · 0 missing · 0 excluded``."""
    if n == 0:
        return "—", "—", f"0 / 0 observed · {_tail(missing, excluded)}"
    return (percent_of(k, n), percent_bounds(low, high),
            f"{k} / {n} observed · {_tail(missing, excluded)}")


def mean_cells(mean: float, n: int, low: float, high: float, missing: int, excluded: int) -> tuple[str, str, str]:
    """``0.866``, ``[0.506, 0.990]``, ``mean of 13 observed · 0 missing · 0 excluded``."""
    if n == 0:
        return "—", "—", f"mean of 0 observed · {_tail(missing, excluded)}"
    return (fixed(mean, 3), f"[{stats.floor_to(low, 3):.3f}, {stats.ceil_to(high, 3):.3f}]",
            f"mean of {n} observed · {_tail(missing, excluded)}")


def points_cells(diff: float, low: float, high: float) -> tuple[str, str]:
    """A paired difference in percentage points: ``+6.7 points``, ``[-26.5, +40.8]``."""
    return (f"{fixed(100 * diff, 1, sign=True)} points",
            f"[{stats.floor_to(100 * low, 1):+.1f}, {stats.ceil_to(100 * high, 1):+.1f}]")


def cells_like(summary: Any, metric: str | None) -> tuple[str, str, str]:
    """A slice group's cells in its criterion's format in the metric table: a ``fraction``
    criterion (recall) printed as a mean there prints its all-0/1 groups as means too (``1.000``,
    not ``100.0%``), so a criterion has one number format in every row."""
    if metric == "mean" and summary.metric == "proportion" and summary.observed:
        return mean_cells(summary.value, summary.observed, summary.low, summary.high, summary.missing,
                          summary.excluded)
    return tuple(summary.cells)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A box-drawn table; every cell padded to its column's width."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * (w + 2) for w in widths) + right

    def row(cells: Sequence[str]) -> str:
        return "│ " + " │ ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " │"

    return [line("┌", "┬", "┐"), row(header), line("├", "┼", "┤"), *map(row, rows), line("└", "┴", "┘")]


def pct(confidence: float) -> str:
    return f"{100 * confidence:g}%"


def usage_line(criterion: str, spent: dict) -> str:
    """``Usage: groundedness 13 calls · 5,120 input tokens · 260 output tokens · $0.0123``."""
    calls = spent.get("calls", 0)
    parts = [f"{calls} call" + ("" if calls == 1 else "s")]
    for key, label in (("input_tokens", "input tokens"), ("output_tokens", "output tokens")):
        if key in spent:
            parts.append(f"{int(spent[key]):,} {label}")
    if "cost" in spent:
        parts.append(f"${fixed(spent['cost'], 4)}")
    return f"Usage: {criterion} " + " · ".join(parts)
