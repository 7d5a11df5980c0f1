"""The ``citations/v1`` artifact: the ids an answer cites, in its order."""

from __future__ import annotations

from typing import Any

from oloproof import ArtifactError, hookimpl


class CitationsArtifact:
    """Validates and exports ``citations/v1``: ``{ids: [...]}``."""

    def from_data(self, data: Any) -> list[str]:
        if isinstance(data, dict):
            if set(data) != {"ids"}:
                raise ArtifactError(f"expected {{ids: [...]}}, got keys {sorted(data)}")
            data = data["ids"]
        if isinstance(data, (str, bytes)) or not isinstance(data, (list, tuple)):
            raise ArtifactError(f"ids: expected a list of ids, got {data!r}",
                                fix='record a list, e.g. citations(["kb-01"])')
        for i, cited in enumerate(data):
            if not isinstance(cited, str) or not cited:
                raise ArtifactError(f"ids[{i}]: expected a non-empty string, got {cited!r}")
        return list(data)

    def to_data(self, value: Any) -> dict:
        return {"ids": self.from_data(value)}


@hookimpl
def oloproof_register_artifacts(registry):
    registry.add("citations/v1", CitationsArtifact)
