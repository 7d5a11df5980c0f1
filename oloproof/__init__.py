"""Oloproof's public API: what users, third-party plugins and the builtin plugins import.

Everything here is re-exported from the engine in ``oloproof_core``; import from ``oloproof``
only, never from ``oloproof_core``.
"""

from oloproof_core import display, stats
from oloproof_core.errors import ArtifactError, CaseMissing, ConfigError, EvaluationError, OloproofError, PluginError
from oloproof_core.hookspecs import hookimpl
from oloproof_core.model import (
    Case,
    Context,
    ContextItem,
    DroppedItem,
    Execution,
    Judgment,
    Passage,
    Retrieval,
    Summary,
    SystemContext,
    select,
)
from oloproof_core.relevance import latest, ranked_units, relevant_units, unit_key
from oloproof_core.recording import Recorder, SystemInfo, current_case, source_fingerprint, system
from oloproof_core.registry import Registry
from oloproof_core.identity import canonical, digest

__version__ = "0.1.0"

__all__ = [
    "ArtifactError",
    "Case",
    "CaseMissing",
    "ConfigError",
    "Context",
    "ContextItem",
    "DroppedItem",
    "EvaluationError",
    "Execution",
    "Judgment",
    "OloproofError",
    "Passage",
    "PluginError",
    "Recorder",
    "Registry",
    "Retrieval",
    "Summary",
    "SystemContext",
    "SystemInfo",
    "canonical",
    "current_case",
    "digest",
    "display",
    "hookimpl",
    "latest",
    "ranked_units",
    "relevant_units",
    "unit_key",
    "source_fingerprint",
    "stats",
    "select",
    "system",
]
