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
    ("same", "inspect-json"): "961d63294cef723ef9c3b7cd0e3f82f94f6d2c49e0a6980e6ddb05a6cf3f2877",
    ("same", "inspect-failures-json"): "b532d1fa9d295bb9c40074638930c5fd122e907874e91c695caa76b329145409",
    ("same", "inspect-case"): "774e1cbb7d8a2ac16e45117135c7f42046cbafeb21e93d300f5168ed0d8a8f97",
    ("same", "inspect-case-json"): "1f6b191869fa72bb905eaad08354751ffdba02f53dfe3d4115fa7b43890c2a23",
    ("same", "compare"): "4c20f7443989265800de1bbb51252f1150793f6e1150d0800fa9acda29a62ef8",
    ("same", "compare-all"): "0ab35bd1f88832c5ec91bf4a4a1538c396c035f14b37655d00da5468a719b94b",
    ("same", "compare-json"): "f739afe6aecbff947b0b9744be87593108e32864050891b471f2af4e485d1af9",
    ("same", "compare-files"): "e70e9c1cc26d035ead3771776da54367977a7a9b1100191ddc2a88dff4bd142f",
    ("same", "export"): "362a8e32b3c0392ba2664c75e996b386d828121e0533bc23ad8e8ba7cea10587",
    ("shuffled", "inspect"): "f24a63f8bdec42299addaa110fb8a9124b0d3e29457aa07ce3b1d7c057a9369e",
    ("shuffled", "inspect-failures"): "8113ab4ff10a27e39ced9d20d82bda9d7dfd902d0e9946a496bc9ecfbde2f465",
    ("shuffled", "inspect-json"): "961d63294cef723ef9c3b7cd0e3f82f94f6d2c49e0a6980e6ddb05a6cf3f2877",
    ("shuffled", "inspect-failures-json"): "b532d1fa9d295bb9c40074638930c5fd122e907874e91c695caa76b329145409",
    ("shuffled", "inspect-case"): "774e1cbb7d8a2ac16e45117135c7f42046cbafeb21e93d300f5168ed0d8a8f97",
    ("shuffled", "inspect-case-json"): "1f6b191869fa72bb905eaad08354751ffdba02f53dfe3d4115fa7b43890c2a23",
    ("shuffled", "compare"): "4c20f7443989265800de1bbb51252f1150793f6e1150d0800fa9acda29a62ef8",
    ("shuffled", "compare-all"): "0ab35bd1f88832c5ec91bf4a4a1538c396c035f14b37655d00da5468a719b94b",
    ("shuffled", "compare-json"): "f739afe6aecbff947b0b9744be87593108e32864050891b471f2af4e485d1af9",
    ("shuffled", "compare-files"): "e70e9c1cc26d035ead3771776da54367977a7a9b1100191ddc2a88dff4bd142f",
    ("shuffled", "export"): "362a8e32b3c0392ba2664c75e996b386d828121e0533bc23ad8e8ba7cea10587",
    ("subset", "inspect"): "f24a63f8bdec42299addaa110fb8a9124b0d3e29457aa07ce3b1d7c057a9369e",
    ("subset", "inspect-failures"): "8113ab4ff10a27e39ced9d20d82bda9d7dfd902d0e9946a496bc9ecfbde2f465",
    ("subset", "inspect-json"): "961d63294cef723ef9c3b7cd0e3f82f94f6d2c49e0a6980e6ddb05a6cf3f2877",
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
    ("same+clusters", "inspect-json"): "88c4bd983c9ebf48584a8a24b9b04386c4dec1e72f310e0b9aaaeaf2d6c53015",
    ("same+clusters", "inspect-failures-json"): "4a6ccbbe8fe769e3485b113d1fb6e35e39fc6b2853893da17699773a3edc6d16",
    ("same+clusters", "inspect-case"): "774e1cbb7d8a2ac16e45117135c7f42046cbafeb21e93d300f5168ed0d8a8f97",
    ("same+clusters", "inspect-case-json"): "35b152ff54ff5f16195bb83f8c9ed1221043533117f38f6ed2727fe15f1bc6cd",
    ("same+clusters", "compare"): "9bafce4b367d60339ec3d2656a936c7b6b0314430c7366de6a00a2e72a9c36ba",
    ("same+clusters", "compare-all"): "8cf4cfe3510eb0740b35e7bfefcae2f3f854fd2cd7f72c9b21c48feffc5301d4",
    ("same+clusters", "compare-json"): "bd2891177efd421dde2338f0a82e35e1ac707c5ee68071796a4c9d2652f82681",
    ("same+clusters", "compare-files"): "225ea0d05bd6cf7dfae9dbc23ecacf46913ed24b90ea4a08a65b68c5b2901ce1",
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
