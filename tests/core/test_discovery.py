"""The cheap look for other distributions' plugins answers "none" only when there are none."""

from __future__ import annotations

import sys

from oloproof_core.hooks.discovery import others_may_exist


def _dist(folder, name, entry_points=None):
    info = folder / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Name: {name}\nVersion: 1.0\n")
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)


def test_only_oloproof_s_own_entry_points_means_none(tmp_path, monkeypatch):
    _dist(tmp_path, "oloproof", "[oloproof]\nhttp = oloproof_http\n")
    _dist(tmp_path, "requests", "[console_scripts]\nx = y:z\n")
    _dist(tmp_path, "plain")
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(tmp_path / "absent")])
    assert others_may_exist() is False


def test_another_distribution_s_plugin_is_seen(tmp_path, monkeypatch):
    _dist(tmp_path, "oloproof", "[oloproof]\nhttp = oloproof_http\n")
    _dist(tmp_path, "oloproof_chat_report", "[console_scripts]\nc = d:e\n\n[ oloproof ]\nchat = chat\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert others_may_exist() is True


def test_a_zip_on_the_path_is_read_properly(tmp_path, monkeypatch):
    (tmp_path / "plugins.zip").write_bytes(b"PK")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "plugins.zip")])
    assert others_may_exist() is True


def test_the_real_environment_agrees_with_importlib_metadata():
    from importlib_metadata import entry_points

    others = {ep.dist.name for ep in entry_points(group="oloproof") if ep.dist and ep.dist.name != "oloproof"}
    assert others_may_exist() is bool(others)  # folders only on this path: the look is exact
