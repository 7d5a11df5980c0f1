"""The jsonfolder store keeps the store contract: Oloproof's conformance kit, run on it."""

import json

import pytest

from oloproof.testing import StoreContract
from oloproof_jsonfolder_store import JsonFolderStore, Options


class TestJsonFolderStore(StoreContract):
    @pytest.fixture
    def open_store(self, tmp_path):
        def open_one():  # each call: a new handle on the same folder, as another process would open
            return JsonFolderStore(Options(path="store"), tmp_path)

        return open_one

    @pytest.fixture
    def tamper(self):
        def change(store, what, ident):  # the stored bytes changed behind the store's back
            if what == "case":
                for chunk in (store.path / "runs" / ident).glob("cases-*.json"):
                    chunk.write_text(chunk.read_text(encoding="utf-8").replace("question", "QUESTION"), encoding="utf-8")
            else:
                path = store._cache_file("kit", ident)
                entry = json.loads(path.read_text(encoding="utf-8"))
                path.write_text(json.dumps({**entry, "value": '{"v": 99}'}), encoding="utf-8")

        return change
