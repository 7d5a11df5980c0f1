"""How estimates print: the metric table's cells, with intervals rounded outward."""

from __future__ import annotations

from . import stats


def _tail(missing: int, excluded: int) -> str:
    return f"{missing} missing · {excluded} excluded"


def proportion_cells(k: int, n: int, low: float, high: float, missing: int, excluded: int) -> tuple[str, str, str]:
    """``69.2%``, ``[38.5%, 91.0%]``, ``9 / 13 observed · 0 missing · 0 excluded``."""
    if n == 0:
        return "—", "—", f"0 / 0 observed · {_tail(missing, excluded)}"
    return (f"{100 * k / n:.1f}%",
            f"[{stats.floor_to(100 * low, 1):.1f}%, {stats.ceil_to(100 * high, 1):.1f}%]",
            f"{k} / {n} observed · {_tail(missing, excluded)}")


def mean_cells(mean: float, n: int, low: float, high: float, missing: int, excluded: int) -> tuple[str, str, str]:
    """``0.866``, ``[0.506, 0.990]``, ``mean of 13 observed · 0 missing · 0 excluded``."""
    if n == 0:
        return "—", "—", f"mean of 0 observed · {_tail(missing, excluded)}"
    return (f"{mean:.3f}", f"[{stats.floor_to(low, 3):.3f}, {stats.ceil_to(high, 3):.3f}]",
            f"mean of {n} observed · {_tail(missing, excluded)}")


def points_cells(diff: float, low: float, high: float) -> tuple[str, str]:
    """A paired difference in percentage points: ``+6.7 points``, ``[-26.5, +40.8]``."""
    return (f"{100 * diff:+.1f} points",
            f"[{stats.floor_to(100 * low, 1):+.1f}, {stats.ceil_to(100 * high, 1):+.1f}]")
