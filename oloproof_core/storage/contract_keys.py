"""The conformance kit's tests of keyed checksums (docs/stores.md): a part of ``StoreContract``,
run for a store that has a ``key`` attribute (the store key it read when it was opened)."""

from __future__ import annotations

import pytest

from oloproof_core.model.errors import OloproofError
from oloproof_core.storage.contract_data import SUMMARY, case_records, run_header


class KeyedContract:
    """What a store with a store key guarantees against a writer without it."""

    def test_with_a_store_key_what_a_writer_without_it_wrote_is_refused(self, open_store, monkeypatch):
        """A handle without the key is what a writer with table rights and no key can do: its
        cache values are misses counted in ``damaged``, its runs are refused and left out of
        ``list_runs``, and ``check()`` names them; what the keyed handle wrote, a handle without
        the key cannot read as verified (a miss, an error naming the key)."""
        monkeypatch.delenv("OLOPROOF_STORE_KEY", raising=False)
        plain = open_store()
        if not hasattr(plain, "key"):
            pytest.skip("the store has no store key")
        monkeypatch.setenv("OLOPROOF_STORE_KEY", "kit-key-0123456789abcdef")
        signed = open_store()
        monkeypatch.delenv("OLOPROOF_STORE_KEY")
        signed.save_run(run_header("run_01KIT0000000000000000000M1", 2), case_records(2), SUMMARY)
        signed.cache_put_many("kit", [("k1", {"v": 1})])
        plain.save_run(run_header("run_01KIT0000000000000000000M2", 2), case_records(2), SUMMARY)
        plain.cache_put_many("kit", [("k2", {"v": 2})])
        assert signed.cache_get_many("kit", ["k1", "k2"]) == {"k1": {"v": 1}} and signed.damaged == {"kit": 1}
        assert [h["id"] for h in signed.list_runs()] == ["run_01KIT0000000000000000000M1"]
        assert signed.damaged_runs == ["run_01KIT0000000000000000000M2"]
        with pytest.raises(OloproofError, match="not signed with the store key"):
            list(signed.run_cases("run_01KIT0000000000000000000M2"))
        assert list(signed.run_cases("run_01KIT0000000000000000000M1")) == case_records(2)
        if hasattr(signed, "check"):
            problems = signed.check()["problems"]
            assert len(problems) == 2 and all("not signed with the store key" in p for p in problems), problems
        assert plain.cache_get_many("kit", ["k1"]) == {} and plain.damaged == {}
        with pytest.raises(OloproofError, match="signed with a store key"):
            plain.get_run("run_01KIT0000000000000000000M1")
