"""Layer 1, the data model: cases, executions, judgments, retrieval evidence, errors and identities.

Imports nothing else of ``oloproof_core`` (docs/architecture.md)."""
