"""Oloproof's public API: what users, third-party plugins and the builtin plugins import.

Everything here is re-exported from the engine in ``oloproof_core``; import from ``oloproof``
only, never from ``oloproof_core``.
"""

from oloproof_core.statistics import display, intervals as stats
from oloproof_core.workflows.api import evaluate, run
from oloproof_core.model.errors import (ArtifactError, CaseMissing, ConfigError, EvaluationError, OloproofError, PluginError)
from oloproof_core.hooks.specs import hookimpl
from oloproof_core.workflows.project import Project
from oloproof_core.model.records import (
    acceptable_texts, Case, Execution, Judgment, Summary, StageCache, SystemContext, select, tally,
)
from oloproof_core.model.artifacts import Context, ContextItem, DroppedItem, Passage, Retrieval
from oloproof_core.model.retrieval import (
    AtKEvaluator, AtKOptions, Evidence, context_from_prompt, context_names, evidence_words, latest, observe, one_of, ranked_units,
    relevant_units, retrieval_data, retrieval_from_data, unit_key, whole_documents,
)
from oloproof_core.model.perturbation import Perturbation, is_relevant, recorded_context, renumbered, seeded
from oloproof_core.engine.recording import (
    RagSystemInfo, Recorder, SystemInfo, call_with_recorder, code_fingerprint, current_case, import_object,
    rag_system, source_fingerprint, system,
)
from oloproof_core.engine.fingerprint import project_fingerprint, reach_fingerprint
from oloproof_core.engine.fingerprint import short as short_fingerprint
from oloproof_core.hooks.registry import Registry
from oloproof_core.storage.check import Untrusted, check_rows, only_unsigned, resigned_run, resigned_value
from oloproof_core.storage.runs import (
    PAGE, QUARANTINED, RunWriter, checked_case, checked_seal, checksum, damaged_run, key_needed, keyed,
    process_gone, row_checksum, seal_intact, seal_of, seal_verdict, sealed_records, shown_text, store_key, this_process,
    unsigned, valid_run_id, verdict, write_run, listed_runs,
)
from oloproof_core.storage.checksums import checked_object
from oloproof_core.storage.query import RANK as STATUS_RANK, case_text, case_words, cells as case_cells, checked_query
from oloproof_core.model.identity import canonical, digest
from oloproof_core.model.untrusted import NotStorable, clean_text, is_refusal, storable, strict_json
from oloproof_core.engine.claims import ClaimJudge, ClaimOptions
from oloproof_core.engine.embeddings import (
    EmbeddingCache, Embeddings, cosine, identified_provider, open_embedder, vectors_of,
)
from oloproof_core.engine.providers import (
    JsonProvider, JudgeOptions, LLMJudge, Reply, json_objects, judgment_from_reply, open_provider, retry_after, text_of,
)
from oloproof_core.model.identity import json_encoder

__version__ = "0.1.0"

__all__ = [
    "PAGE",
    "STATUS_RANK",
    "case_cells",
    "case_text",
    "case_words",
    "checked_query",
    "QUARANTINED",
    "checked_seal",
    "key_needed",
    "keyed",
    "seal_verdict",
    "shown_text",
    "store_key",
    "unsigned",
    "valid_run_id",
    "verdict",
    "NotStorable",
    "clean_text",
    "is_refusal",
    "storable",
    "strict_json",
    "acceptable_texts",
    "ArtifactError",
    "AtKEvaluator",
    "Perturbation",
    "is_relevant",
    "recorded_context",
    "renumbered",
    "seeded",
    "AtKOptions",
    "Case",
    "CaseMissing",
    "ClaimJudge",
    "ClaimOptions",
    "ConfigError",
    "Context",
    "ContextItem",
    "DroppedItem",
    "EvaluationError",
    "EmbeddingCache",
    "Embeddings",
    "Evidence",
    "Execution",
    "JsonProvider",
    "JudgeOptions",
    "Judgment",
    "LLMJudge",
    "OloproofError",
    "Passage",
    "PluginError",
    "Project",
    "RagSystemInfo",
    "Recorder",
    "Registry",
    "Reply",
    "Retrieval",
    "RunWriter",
    "StageCache",
    "Summary",
    "SystemContext",
    "SystemInfo",
    "call_with_recorder",
    "canonical",
    "check_rows",
    "Untrusted",
    "only_unsigned",
    "resigned_run",
    "resigned_value",
    "checked_object",
    "listed_runs",
    "checksum",
    "code_fingerprint",
    "context_from_prompt",
    "context_names",
    "cosine",
    "current_case",
    "digest",
    "json_encoder",
    "display",
    "evidence_words",
    "hookimpl",
    "identified_provider",
    "import_object",
    "judgment_from_reply",
    "json_objects",
    "rag_system",
    "latest",
    "observe",
    "one_of",
    "project_fingerprint",
    "reach_fingerprint",
    "short_fingerprint",
    "open_embedder",
    "open_provider",
    "ranked_units",
    "relevant_units",
    "retrieval_data",
    "retrieval_from_data",
    "retry_after",
    "run",
    "evaluate",
    "seal_intact",
    "seal_of",
    "checked_case",
    "damaged_run",
    "sealed_records",
    "row_checksum",
    "process_gone",
    "this_process",
    "write_run",
    "unit_key",
    "vectors_of",
    "whole_documents",
    "source_fingerprint",
    "stats",
    "select",
    "system",
    "tally",
    "text_of",
]
