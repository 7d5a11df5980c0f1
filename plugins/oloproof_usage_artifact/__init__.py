"""The ``usage/v1`` artifact: what a case cost, as its trace tells it: token counts and the
seconds spent in each stage (``{tokens: {prompt, completion, total}, stages: {retriever: 0.012}}``)."""

from __future__ import annotations

from typing import Any

from oloproof import ArtifactError, hookimpl

TOKENS = ("prompt", "completion", "total")


class UsageArtifact:
    """Validates and exports ``usage/v1``: ``{tokens: {prompt?, completion?, total?}, stages: {name: seconds}}``."""

    def from_data(self, data: Any) -> dict:
        if not isinstance(data, dict):
            raise ArtifactError(f"expected an object with tokens and stages, got {data!r}")
        unknown = sorted(set(data) - {"tokens", "stages"})
        if unknown:
            raise ArtifactError(f"{unknown[0]}: unknown field", fix="use tokens and stages")
        tokens, stages = data.get("tokens", {}), data.get("stages", {})
        if not isinstance(tokens, dict) or not isinstance(stages, dict):
            raise ArtifactError("tokens and stages must be objects")
        for name, value in tokens.items():
            if name not in TOKENS:
                raise ArtifactError(f"tokens.{name}: unknown count", fix=f"use {', '.join(TOKENS)}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ArtifactError(f"tokens.{name}: expected a whole number >= 0, got {value!r}")
        for name, value in stages.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ArtifactError(f"stages.{name}: expected seconds >= 0, got {value!r}")
        return {"tokens": dict(tokens), "stages": {k: float(v) for k, v in stages.items()}}

    def to_data(self, value: Any) -> dict:
        return self.from_data(value)


@hookimpl
def oloproof_register_artifacts(registry):
    registry.add("usage/v1", UsageArtifact)
