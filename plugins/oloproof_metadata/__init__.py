"""The ``metadata.<field>`` slices: group cases by a field of their ``metadata``."""

from __future__ import annotations

from typing import Any

from oloproof import ConfigError, hookimpl, select


class MetadataSlice:
    def __init__(self, field: str | None):
        if not field:
            raise ConfigError("slice 'metadata' needs a field", fix="write e.g. `metadata.topic`")
        self.field = field
        self.name = f"metadata.{field}"

    def key(self, case: Any, execution: Any) -> str | None:
        value = select(case.metadata, self.field)
        return None if value is None else str(value)


@hookimpl
def oloproof_register_slices(registry):
    registry.add("metadata", MetadataSlice)
