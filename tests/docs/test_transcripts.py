"""Every console transcript in docs/ runs against the shipped examples and prints what the docs show."""

from __future__ import annotations

from pathlib import Path

import pytest

from transcripts import blocks, check_page, find

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if blocks(p.read_text(encoding="utf-8")))


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_transcripts(page, tmp_path):
    check_page(page, tmp_path)


def test_matcher_masks_ids_compares_cells_and_fails_on_a_changed_line():
    got = ["Run run_01M8PDTX536A0QC8GXNVWX14QM [DECIDED/COMPLETE]", "┌──┐", "│ a   │ 1 │", "tail"]
    assert find(["Run run_01M4FCBPE0G550CKCVGXCNEM2P [DECIDED/COMPLETE]", "│ a │ 1 │"], got) is None
    assert find(["Run run_… [DECIDED/COMPLETE]", "...", "tail"], got) is None
    assert find(["│ a │ 2 │"], got) == "│ a │ 2 │"
    assert find(["tail", "...", "│ a │ 1 │"], got) == "│ a │ 1 │"  # order matters
