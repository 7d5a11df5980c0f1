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


def test_entry_points_and_distributions_read_directly_are_importlib_metadata_s():
    """On a sys.path of folders, the direct read gives importlib-metadata's answers: every entry
    point of the group (name, value, what it loads) and each distribution's name and version."""
    import importlib_metadata as metadata

    from oloproof_core.hooks.discovery import distribution, entry_points
    from oloproof_core.hooks.manager import name_and_version

    mine = {(ep.name, ep.value): ep for ep in entry_points("oloproof")}
    theirs = {(ep.name, ep.value): ep for ep in metadata.entry_points(group="oloproof")}
    assert set(mine) == set(theirs) and len(mine) > 40
    for key, ep in theirs.items():
        assert name_and_version(mine[key].dist) == name_and_version(ep.dist)
    assert mine[("contains", theirs[next(k for k in theirs if k[0] == "contains")].value)].load() is \
        theirs[next(k for k in theirs if k[0] == "contains")].load()
    for name in ("attrs", "ruamel.yaml", "ruamel_yaml", "oloproof", "click"):
        assert name_and_version(distribution(name)) == name_and_version(metadata.distribution(name))
    assert distribution("no-such-distribution-here") is None


def test_a_zip_on_the_path_sends_the_direct_read_to_importlib_metadata(tmp_path, monkeypatch):
    from oloproof_core.hooks.discovery import distribution, entry_points

    archive = tmp_path / "plugins.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip
    monkeypatch.setattr(sys, "path", [str(archive), *sys.path])
    assert entry_points("oloproof") is None and distribution("attrs") is False
