"""The reading commands stream a run and print what they printed when they held it whole.

Two runs of 3,000 cases (tests/core/read_stream_data.py: fixed ids, seeded records, outputs with no
output, excluded and missing judgments, scores, slices, clusters) are read by inspect (plain,
--failures, --format json, --case), export and compare (text, --slices --cases, JSON, JUnit with
the cases, Markdown). The digests below are of what each command printed, and the files it wrote,
before the commands streamed: the same runs must read the same. The baseline is stored in the
candidate's order (compare merges), shuffled or with every third case left out (compare joins by
id), and with clusters (compare pairs cluster means). Memory is measured by
benchmarks/read_stream.py, not here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import read_stream_data as data
from conftest import olo
from oloproof_core.cli import cli

PINNED = {
    ("same", "inspect"): "f24a63f8bdec42299addaa110fb8a9124b0d3e29457aa07ce3b1d7c057a9369e",
    ("same", "inspect-failures"): "8113ab4ff10a27e39ced9d20d82bda9d7dfd902d0e9946a496bc9ecfbde2f465",
    ("same", "inspect-json"): "02d9aaafb4d9759c1d9f549a37fde98efb1ae4da5161ca1bb486d818d7815aea",
    ("same", "inspect-failures-json"): "b532d1fa9d295bb9c40074638930c5fd122e907874e91c695caa76b329145409",
    ("same", "inspect-case"): "774e1cbb7d8a2ac16e45117135c7f42046cbafeb21e93d300f5168ed0d8a8f97",
    ("same", "inspect-case-json"): "1f6b191869fa72bb905eaad08354751ffdba02f53dfe3d4115fa7b43890c2a23",
    ("same", "compare"): "81f7c15fa0eec83cc1c84eecf2e93db684f3bae37dc2f7875a409a43735a9983",
    ("same", "compare-all"): "ea6f6edd025a3e51facceed403cc0119b00b884a6fdd63ec6ab7e01655311c2e",
    ("same", "compare-json"): "338a2273732954ef06ddbb1b0b6e2476fdae6c333467ec7201c4c1a3eb0d8853",
    ("same", "compare-files"): "732a1a93a68c36a237b5c95b0a8693defc495c54d588f0a05aab0c66e1e02608",
    ("same", "export"): "362a8e32b3c0392ba2664c75e996b386d828121e0533bc23ad8e8ba7cea10587",
    ("shuffled", "inspect"): "f24a63f8bdec42299addaa110fb8a9124b0d3e29457aa07ce3b1d7c057a9369e",
    ("shuffled", "inspect-failures"): "8113ab4ff10a27e39ced9d20d82bda9d7dfd902d0e9946a496bc9ecfbde2f465",
    ("shuffled", "inspect-json"): "02d9aaafb4d9759c1d9f549a37fde98efb1ae4da5161ca1bb486d818d7815aea",
    ("shuffled", "inspect-failures-json"): "b532d1fa9d295bb9c40074638930c5fd122e907874e91c695caa76b329145409",
    ("shuffled", "inspect-case"): "774e1cbb7d8a2ac16e45117135c7f42046cbafeb21e93d300f5168ed0d8a8f97",
    ("shuffled", "inspect-case-json"): "1f6b191869fa72bb905eaad08354751ffdba02f53dfe3d4115fa7b43890c2a23",
    ("shuffled", "compare"): "81f7c15fa0eec83cc1c84eecf2e93db684f3bae37dc2f7875a409a43735a9983",
    ("shuffled", "compare-all"): "ea6f6edd025a3e51facceed403cc0119b00b884a6fdd63ec6ab7e01655311c2e",
    ("shuffled", "compare-json"): "338a2273732954ef06ddbb1b0b6e2476fdae6c333467ec7201c4c1a3eb0d8853",
    ("shuffled", "compare-files"): "732a1a93a68c36a237b5c95b0a8693defc495c54d588f0a05aab0c66e1e02608",
    ("shuffled", "export"): "362a8e32b3c0392ba2664c75e996b386d828121e0533bc23ad8e8ba7cea10587",
    ("subset", "inspect"): "f24a63f8bdec42299addaa110fb8a9124b0d3e29457aa07ce3b1d7c057a9369e",
    ("subset", "inspect-failures"): "8113ab4ff10a27e39ced9d20d82bda9d7dfd902d0e9946a496bc9ecfbde2f465",
    ("subset", "inspect-json"): "02d9aaafb4d9759c1d9f549a37fde98efb1ae4da5161ca1bb486d818d7815aea",
    ("subset", "inspect-failures-json"): "b532d1fa9d295bb9c40074638930c5fd122e907874e91c695caa76b329145409",
    ("subset", "inspect-case"): "774e1cbb7d8a2ac16e45117135c7f42046cbafeb21e93d300f5168ed0d8a8f97",
    ("subset", "inspect-case-json"): "1f6b191869fa72bb905eaad08354751ffdba02f53dfe3d4115fa7b43890c2a23",
    ("subset", "compare"): "89b3334dc0df869443c2625005ac5bbad1e36a72c4815088e79d996fda4ec52e",
    ("subset", "compare-all"): "2d375459ad018a830fa44775e093ab96d101b483d15aec84bafe77ddeaa07e82",
    ("subset", "compare-json"): "172f77be421a9a23316a222d81c9b3d27aee7408dce77ff16b2f67897092b696",
    ("subset", "compare-files"): "c5d80889bf8028af132445cf571ab2b543a43e4073791abe9ab67c8c825c4416",
    ("subset", "export"): "362a8e32b3c0392ba2664c75e996b386d828121e0533bc23ad8e8ba7cea10587",
    ("same+clusters", "inspect"): "f24a63f8bdec42299addaa110fb8a9124b0d3e29457aa07ce3b1d7c057a9369e",
    ("same+clusters", "inspect-failures"): "8113ab4ff10a27e39ced9d20d82bda9d7dfd902d0e9946a496bc9ecfbde2f465",
    ("same+clusters", "inspect-json"): "f89877795a4d6fb9c1b35d70b79cc25e8f026a2645e71593b6666bf20203aefb",
    ("same+clusters", "inspect-failures-json"): "4a6ccbbe8fe769e3485b113d1fb6e35e39fc6b2853893da17699773a3edc6d16",
    ("same+clusters", "inspect-case"): "774e1cbb7d8a2ac16e45117135c7f42046cbafeb21e93d300f5168ed0d8a8f97",
    ("same+clusters", "inspect-case-json"): "35b152ff54ff5f16195bb83f8c9ed1221043533117f38f6ed2727fe15f1bc6cd",
    ("same+clusters", "compare"): "3e0753c58d2848aeff072f786dbc6cb4a3f62a6e84765b69d38f1633aad29ab8",
    ("same+clusters", "compare-all"): "2e7caea624580b40933444e978d764cf0fa557d16d62e3de018b2d1309905973",
    ("same+clusters", "compare-json"): "26a6c24de907518aabfdf9b61c2f09af5035021ea4cd90702c8856da3e2e9164",
    ("same+clusters", "compare-files"): "cce97df74a19bc10093312281455fd23e33790a5f9951df4c4cf8cfbac6feffe",
    ("same+clusters", "export"): "772790d09d7839cd234857060ef50950b672e40616996efe85be908b1421ebe0",
}
@pytest.mark.slow
@pytest.mark.parametrize("variant", ["same", "shuffled", "subset", "same+clusters"])
def test_reading_commands_print_what_they_printed(variant: str, tmp_path: Path, monkeypatch) -> None:
    order, _, clusters = variant.partition("+")
    root = data.build(tmp_path / "p", clusters=clusters == "clusters", baseline_order=order)
    monkeypatch.chdir(root)
    monkeypatch.setenv("NO_COLOR", "1")
    changed = []
    for name, argv in data.commands().items():
        result = CliRunner().invoke(cli, argv, catch_exceptions=False)
        assert result.exit_code == 0, (name, result.output[-2000:])
        if data.fingerprint(root, name, result.stdout_bytes) != PINNED[(variant, name)]:
            changed.append(name)
    assert changed == []


def test_compare_joins_runs_listed_in_another_order(tmp_path: Path, monkeypatch) -> None:
    """The comparison (and its id) is the same whether the baseline lists the cases in the
    candidate's order or not."""
    ids = []
    for order in ("same", "shuffled"):
        root = data.build(tmp_path / order, n=400, baseline_order=order)
        monkeypatch.chdir(root)
        result = CliRunner().invoke(cli, data.commands()["compare-all"], catch_exceptions=False)
        ids.append(result.output)
    assert ids[0] == ids[1] and ids[0].startswith("Comparison sha256:")


@pytest.mark.slow
def test_export_html_refuses_a_run_too_large_for_one_page(tmp_path: Path) -> None:
    root = data.build(tmp_path / "p", n=10_001)
    result = olo("export", data.CANDIDATE, "--html", "report.html", cwd=root)
    assert result.code == 2 and result.out == ""
    assert result.err == (
        f"error: --html: run {data.CANDIDATE} has 10,001 cases, and an HTML report, which holds every case's page, "
        f"is made for runs of up to 10,000; fix: write the bundle with `oloproof export {data.CANDIDATE}` "
        f"(cases.jsonl), or list the failures with `oloproof inspect {data.CANDIDATE} --failures`\n")
    assert not (root / "report.html").exists()
