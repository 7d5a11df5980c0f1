"""The store conformance kit: the contract every store meets, as tests a store package runs.

Subclass :class:`StoreContract` in a test module of the store's package and give it an
``open_store`` fixture: a function that opens a new handle on one fresh, empty store each time it
is called (two calls: two handles, as two processes would have, on the same data)::

    from oloproof.testing import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def open_store(self, tmp_path):
            return lambda: MyStore(Options(root=str(tmp_path)), tmp_path)

An optional ``tamper`` fixture (``tamper(store, what, ident)`` changes the stored bytes of a
``"case"`` record of run ``ident``, or the ``"cache"`` value of key ``ident`` in namespace
``"kit"``, behind the store's back) enables the integrity tests; without it they are skipped.
docs/stores.md lists what each test checks.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from oloproof_core.model.errors import ConfigError, OloproofError
from oloproof_core.storage.contract_data import SUMMARY, case_records, run_header
from oloproof_core.storage.contract_keys import KeyedContract
from oloproof_core.storage.contract_query import QueryContract

__all__ = ["SUMMARY", "KeyedContract", "QueryContract", "StoreContract", "case_records", "run_header"]


class StoreContract(KeyedContract, QueryContract):
    """The tests every store passes. Subclass it (a name starting with ``Test``) and define the
    ``open_store`` fixture; optionally ``tamper``."""

    @pytest.fixture
    def open_store(self) -> Callable[[], Any]:
        pytest.fail("define the open_store fixture: a function that opens a handle on one fresh store")

    @pytest.fixture
    def store(self, open_store: Callable[[], Any]) -> Any:
        return open_store()

    @pytest.fixture
    def tamper(self) -> Callable[[Any, str, str], None]:
        pytest.skip("the store's test defines no tamper fixture: the integrity tests need one")

    # -- runs ----------------------------------------------------------------------------

    def test_a_run_reads_back_as_written(self, store):
        records = case_records(5)
        store.save_run(run_header("run_01KIT0000000000000000000A1", 5), records, SUMMARY)
        header, summary = store.get_run("run_01KIT0000000000000000000A1")
        assert header == run_header("run_01KIT0000000000000000000A1", 5) and summary == SUMMARY
        back = list(store.run_cases("run_01KIT0000000000000000000A1"))
        assert back == records
        assert [list(r["judgments"]) for r in back] == [["b_second", "a_first"]] * 5, "key order is kept"
        assert [h["id"] for h in store.list_runs()] == ["run_01KIT0000000000000000000A1"]

    def test_runs_are_listed_in_id_order(self, store):
        for run_id in ("run_01KIT0000000000000000000B2", "run_01KIT0000000000000000000B1", "run_01KIT0000000000000000000B3"):
            store.save_run(run_header(run_id, 1), case_records(1), SUMMARY)
        assert [h["id"] for h in store.list_runs()] == sorted(
            ["run_01KIT0000000000000000000B1", "run_01KIT0000000000000000000B2", "run_01KIT0000000000000000000B3"])

    def test_an_empty_run_is_stored(self, store):
        store.save_run(run_header("run_01KIT0000000000000000000E0", 0), [], SUMMARY)
        assert list(store.run_cases("run_01KIT0000000000000000000E0")) == []

    def test_resolve_a_prefix_latest_and_the_errors(self, store):
        with pytest.raises(ConfigError):
            store.resolve_run("latest")  # nothing stored yet
        store.save_run(run_header("run_01KIT0000000000000000000C1", 1), case_records(1), SUMMARY)
        store.save_run(run_header("run_01KIT0000000000000000000C2", 1), case_records(1), SUMMARY)
        store.save_run(run_header("run_01KIT0000000000000000000C3", 1, parent="run_01KIT0000000000000000000C2",
                                  role="intervention"), case_records(1), SUMMARY)
        assert store.resolve_run("run_01KIT0000000000000000000C1") == "run_01KIT0000000000000000000C1"
        assert store.resolve_run("01KIT0000000000000000000C2") == "run_01KIT0000000000000000000C2"
        assert store.resolve_run("latest") == "run_01KIT0000000000000000000C2", "a diagnosis's child run is never latest"
        with pytest.raises(ConfigError, match="ambiguous"):
            store.resolve_run("01KIT")
        with pytest.raises(ConfigError):
            store.resolve_run("run_01KITZZZ")
        with pytest.raises(ConfigError):
            store.get_run("run_01KIT0000000000000000000C9")

    def test_a_run_id_is_written_once(self, store):
        store.save_run(run_header("run_01KIT0000000000000000000D1", 2), case_records(2, "first"), SUMMARY)
        with pytest.raises(Exception):  # noqa: B017 - any error: what matters is that the first run is intact
            store.save_run(run_header("run_01KIT0000000000000000000D1", 3), case_records(3, "second"), SUMMARY)
        assert list(store.run_cases("run_01KIT0000000000000000000D1")) == case_records(2, "first")

    def test_a_run_is_stored_whole_or_not_at_all(self, store):
        def cases():
            yield from case_records(3)
            raise RuntimeError("the run broke while its cases were written")

        with pytest.raises(RuntimeError):
            store.save_run(run_header("run_01KIT0000000000000000000F1", 4), cases(), SUMMARY)
        assert store.list_runs() == []
        with pytest.raises(ConfigError):
            store.resolve_run("run_01KIT0000000000000000000F1")
        store.save_run(run_header("run_01KIT0000000000000000000F1", 2), case_records(2), SUMMARY)
        assert len(list(store.run_cases("run_01KIT0000000000000000000F1"))) == 2, "no stray case record of the failed run"

    def test_a_batch_commits_together_or_not_at_all(self, store):
        if not hasattr(store, "batch"):
            pytest.skip("the store has no batch(): each write is its own transaction")
        with pytest.raises(RuntimeError), store.batch():
            store.save_run(run_header("run_01KIT0000000000000000000G1", 1), case_records(1), SUMMARY)
            store.put_object("diagnosis", "sha256:kitg1", {"a": 1})
            raise RuntimeError("the diagnosis broke before it finished")
        assert store.list_runs() == [] and store.list_objects("diagnosis") == []
        with store.batch():
            store.save_run(run_header("run_01KIT0000000000000000000G1", 1), case_records(1), SUMMARY)
            store.put_object("diagnosis", "sha256:kitg1", {"a": 1})
        assert [h["id"] for h in store.list_runs()] == ["run_01KIT0000000000000000000G1"]
        assert store.list_objects("diagnosis") == [("sha256:kitg1", {"a": 1})]

    # -- streaming runs: begin_run, add, finish, abort -------------------------------------

    @staticmethod
    def _begin(store: Any, run_id: str) -> Any:
        if not hasattr(store, "begin_run"):
            pytest.skip("the store has no begin_run(): its runs are written whole by save_run")
        return store.begin_run(run_id)

    def test_a_streamed_run_reads_back_as_written(self, open_store):
        store = open_store()
        records = case_records(50)
        writer = self._begin(store, "run_01KIT0000000000000000000S1")
        for start in range(0, 50, 7):
            writer.add(records[start:start + 7])
        writer.add([])
        writer.finish(run_header("run_01KIT0000000000000000000S1", 50), SUMMARY)
        for handle in (store, open_store()):
            assert handle.get_run("run_01KIT0000000000000000000S1") == (run_header("run_01KIT0000000000000000000S1", 50),
                                                                        SUMMARY)
            assert list(handle.run_cases("run_01KIT0000000000000000000S1")) == records
        if hasattr(store, "check"):
            assert store.check()["problems"] == [], "the seal made while adding matches the rows"

    def test_a_run_is_invisible_until_finished(self, open_store):
        store, reader = open_store(), open_store()
        writer = self._begin(store, "run_01KIT0000000000000000000S2")
        writer.add(case_records(5))
        for handle in (store, reader):
            assert handle.list_runs() == []
            with pytest.raises(ConfigError):
                handle.resolve_run("latest")
            with pytest.raises(ConfigError):
                handle.get_run("run_01KIT0000000000000000000S2")
            with pytest.raises(ConfigError):
                list(handle.run_cases("run_01KIT0000000000000000000S2"))
            if hasattr(handle, "run_case"):
                with pytest.raises(ConfigError):
                    handle.run_case("run_01KIT0000000000000000000S2", "c001")
        writer.add(case_records(8)[5:])
        writer.finish(run_header("run_01KIT0000000000000000000S2", 8), SUMMARY)
        assert reader.resolve_run("latest") == "run_01KIT0000000000000000000S2", "visible at once when finished"
        assert list(reader.run_cases("run_01KIT0000000000000000000S2")) == case_records(8)

    def test_abort_leaves_nothing(self, open_store):
        store = open_store()
        writer = self._begin(store, "run_01KIT0000000000000000000S3")
        writer.add(case_records(6, "aborted"))
        writer.abort()
        writer.abort()  # a second abort is harmless
        assert store.list_runs() == []
        if hasattr(store, "check"):
            found = store.check()
            assert found["problems"] == [] and found["counts"]["cases"] == 0 and found["counts"]["unfinished"] == 0
        store.save_run(run_header("run_01KIT0000000000000000000S3", 2), case_records(2), SUMMARY)
        assert list(open_store().run_cases("run_01KIT0000000000000000000S3")) == case_records(2), "no stray row"

    def test_abort_after_a_failed_add(self, open_store):
        store = open_store()
        writer = self._begin(store, "run_01KIT0000000000000000000S4")
        writer.add(case_records(3))
        with pytest.raises(Exception):  # noqa: B017 - a record that cannot be stored (no id): any error
            writer.add([{"output": {"answer": "a record without its case id"}}])
        writer.abort()
        assert store.list_runs() == []
        if hasattr(store, "check"):
            assert store.check()["counts"]["unfinished"] == 0

    def test_a_long_run_streams_and_is_checked_before_any_record(self, open_store, tamper):
        store = open_store()
        count = 5000  # longer than a store reads at once

        def records():  # save_run takes any iterable, read once
            for i in range(count):
                yield {"id": f"c{i:05d}", "output": {"answer": f"question {i}"}}

        store.save_run(run_header("run_01KIT0000000000000000000S5", count), records(), SUMMARY)
        back = open_store().run_cases("run_01KIT0000000000000000000S5")
        assert [r["id"] for r in back] == [f"c{i:05d}" for i in range(count)]
        tamper(store, "case", "run_01KIT0000000000000000000S5")
        yielded = []
        with pytest.raises(OloproofError, match="damaged"):
            for record in open_store().run_cases("run_01KIT0000000000000000000S5"):
                yielded.append(record)
        assert yielded == [], "not one record of a run whose rows do not match its seal"

    def test_one_case_by_id(self, store):
        if not hasattr(store, "run_case"):
            pytest.skip("the store has no run_case(): readers scan run_cases")
        records = case_records(5)
        store.save_run(run_header("run_01KIT0000000000000000000S6", 5), records, SUMMARY)
        assert store.run_case("run_01KIT0000000000000000000S6", "c003") == records[3]
        assert store.run_case("run_01KIT0000000000000000000S6", "c999") is None
        with pytest.raises(ConfigError):
            store.run_case("run_01KIT0000000000000000000S9", "c003")

    def test_a_damaged_case_is_an_error_in_run_case(self, store, tamper):
        if not hasattr(store, "run_case"):
            pytest.skip("the store has no run_case()")
        store.save_run(run_header("run_01KIT0000000000000000000S7", 3), case_records(3), SUMMARY)
        tamper(store, "case", "run_01KIT0000000000000000000S7")
        with pytest.raises(OloproofError, match="damaged"):
            store.run_case("run_01KIT0000000000000000000S7", "c001")

    def test_check_reports_unfinished_runs_and_the_next_run_removes_the_abandoned(self, open_store):
        store = open_store()
        if not hasattr(store, "check") or not hasattr(os, "fork"):
            pytest.skip("the store has no check(), or this system cannot fork")
        live = self._begin(store, "run_01KIT0000000000000000000U1")
        live.add(case_records(3))
        child = os.fork()
        if child == 0:  # a process that dies between begin_run and finish
            try:
                dying = open_store().begin_run("run_01KIT0000000000000000000U2")
                dying.add(case_records(4))
            finally:
                os._exit(0)
        os.waitpid(child, 0)
        reader = open_store()
        if hasattr(reader, "read_only"):
            reader.read_only = True  # as `oloproof store check` opens it
        found = reader.check()
        assert found["problems"] == [], "unfinished rows are not damage"
        assert found["counts"]["runs"] == 0 and found["counts"]["cases"] == 0 and found["counts"]["unfinished"] == 2
        assert [(u["run"], u["cases"], u["writing"]) for u in found["unfinished"]] == [
            ("run_01KIT0000000000000000000U1", 3, True), ("run_01KIT0000000000000000000U2", 4, False)], found
        assert all(isinstance(u["started"], float) for u in found["unfinished"])
        self._begin(open_store(), "run_01KIT0000000000000000000U3").abort()
        assert [u["run"] for u in store.check()["unfinished"]] == ["run_01KIT0000000000000000000U1"], \
            "the next run removed the abandoned one's rows, and left the one still being written"
        live.finish(run_header("run_01KIT0000000000000000000U1", 3), SUMMARY)
        found = store.check()
        assert found["counts"]["unfinished"] == 0 and found["counts"]["cases"] == 3 and found["problems"] == []

    # -- caches --------------------------------------------------------------------------

    def test_caches_by_namespace_with_overwrite(self, store):
        assert store.cache_get_many("execution", ["k1", "k2"]) == {}
        store.cache_put_many("execution", [("k1", {"output": "é 漢字", "n": [1, 2.5, None]}), ("k2", [1, "two"])])
        store.cache_put_many("judgment", [("k1", {"value": True})])
        assert store.cache_get_many("execution", ["k1", "k2", "k3"]) == {
            "k1": {"output": "é 漢字", "n": [1, 2.5, None]}, "k2": [1, "two"]}
        assert store.cache_get_many("judgment", ["k1", "k2"]) == {"k1": {"value": True}}
        store.cache_put_many("execution", [("k1", "newer")])
        assert store.cache_get_many("execution", ["k1", "k1"]) == {"k1": "newer"}
        store.cache_put_many("execution", [])
        # a key twice in one call (a case's judgment-cache row, written again as a judgment is added): the last wins
        store.cache_put_many("judgment", [("k3", {"a": 1}), ("k3", {"a": 1, "b": 2})])
        assert store.cache_get_many("judgment", ["k3"]) == {"k3": {"a": 1, "b": 2}}

    def test_cache_holds_says_whether_a_namespace_has_a_value(self, open_store):
        first, second = open_store(), open_store()
        if not hasattr(first, "cache_holds"):
            pytest.skip("the store has no cache_holds(): a run asks the execution cache for every case")
        assert first.cache_holds("execution") is False
        first.cache_put_many("judgment", [("k1", 1)])
        assert first.cache_holds("execution") is False and second.cache_holds("judgment") is True
        first.cache_put_many("execution", [("k1", 1)])
        assert second.cache_holds("execution") is True

    def test_many_cache_keys_at_once(self, store):
        items = [(f"key{i:05d}", {"i": i}) for i in range(2500)]
        store.cache_put_many("stage:retrieve", items)
        found = store.cache_get_many("stage:retrieve", [k for k, _ in items] + ["absent"])
        assert found == dict(items)

    def test_a_cache_written_by_one_handle_is_a_hit_in_another(self, open_store):
        first, second = open_store(), open_store()
        first.cache_put_many("execution", [("shared", {"v": 1})])
        assert second.cache_get_many("execution", ["shared"]) == {"shared": {"v": 1}}
        first.save_run(run_header("run_01KIT0000000000000000000H1", 1), case_records(1), SUMMARY)
        assert second.resolve_run("latest") == "run_01KIT0000000000000000000H1"

    # -- objects -------------------------------------------------------------------------

    def test_objects_by_id_prefix_and_kind(self, store):
        store.put_object("comparison", "sha256:aa11", {"lines": ["one"], "n": 1})
        store.put_object("comparison", "sha256:aa22", {"lines": ["two"]})
        store.put_object("diagnosis", "sha256:bb33", {"labels": {"c001": "RANKED_OUT"}})
        store.put_object("comparison", "sha256:aa11", {"lines": ["changed"]})  # content-addressed: the first stays
        assert store.get_object("sha256:aa11") == ("sha256:aa11", "comparison", {"lines": ["one"], "n": 1})
        assert store.get_object("sha256:bb") == ("sha256:bb33", "diagnosis", {"labels": {"c001": "RANKED_OUT"}})
        with pytest.raises(ConfigError):
            store.get_object("sha256:aa")  # ambiguous
        with pytest.raises(ConfigError):
            store.get_object("sha256:cc")
        assert store.list_objects("comparison") == [("sha256:aa11", {"lines": ["one"], "n": 1}),
                                                    ("sha256:aa22", {"lines": ["two"]})]
        assert store.list_objects("judge_validation") == []
        if hasattr(store, "all_objects"):
            assert [(i, k) for i, k, _ in store.all_objects()] == [
                ("sha256:aa11", "comparison"), ("sha256:aa22", "comparison"), ("sha256:bb33", "diagnosis")]

    # -- several writers at once ---------------------------------------------------------

    def test_concurrent_writers_lose_nothing(self, open_store):
        writers, runs_each = 4, 5
        errors: list[BaseException] = []
        start = threading.Barrier(writers)

        def write(w: int) -> None:
            try:
                store = open_store()
                start.wait()
                for r in range(runs_each):
                    store.save_run(run_header(f"run_01KIT00000000000000000{w}{r:02d}", 20), case_records(20, f"w{w}r{r}"),
                                   SUMMARY)
                    # the same keys from every writer, and keys of its own
                    store.cache_put_many("execution", [(f"shared{k:03d}", {"w": w}) for k in range(50)]
                                         + [(f"own{w}-{r}-{k}", k) for k in range(20)])
                    store.put_object("comparison", f"sha256:{w}{r:02d}", {"w": w, "r": r})
                    store.put_object("comparison", "sha256:same", {"same": True})
            except BaseException as exc:  # noqa: BLE001 - raised in the test's thread below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[0]
        reader = open_store()
        ids = [h["id"] for h in reader.list_runs()]
        assert len(ids) == writers * runs_each
        for w in range(writers):
            for r in range(runs_each):
                assert list(reader.run_cases(f"run_01KIT00000000000000000{w}{r:02d}")) == case_records(20, f"w{w}r{r}")
        shared = reader.cache_get_many("execution", [f"shared{k:03d}" for k in range(50)])
        assert len(shared) == 50 and {v["w"] for v in shared.values()} <= set(range(writers))
        own = reader.cache_get_many("execution", [f"own{w}-{r}-{k}" for w in range(writers) for r in range(runs_each)
                                                  for k in range(20)])
        assert len(own) == writers * runs_each * 20
        assert len(reader.list_objects("comparison")) == writers * runs_each + 1
        if hasattr(reader, "check"):
            assert reader.check()["problems"] == []

    # -- integrity -----------------------------------------------------------------------

    def test_check_counts_everything_and_finds_nothing_wrong(self, store):
        if not hasattr(store, "check"):
            pytest.skip("the store has no check()")
        store.save_run(run_header("run_01KIT0000000000000000000J1", 4), case_records(4), SUMMARY)
        store.cache_put_many("execution", [("a", 1), ("b", 2)])
        store.put_object("comparison", "sha256:j1", {"x": 1})
        found = store.check()
        assert found["problems"] == []
        assert {k: found["counts"][k] for k in ("runs", "cases", "cache", "objects")} == {
            "runs": 1, "cases": 4, "cache": 2, "objects": 1}
        assert isinstance(found["store"], str)

    def test_a_damaged_case_record_is_an_error_and_check_names_it(self, store, tamper):
        store.save_run(run_header("run_01KIT0000000000000000000K1", 3), case_records(3), SUMMARY)
        tamper(store, "case", "run_01KIT0000000000000000000K1")
        with pytest.raises(OloproofError, match="damaged"):
            list(store.run_cases("run_01KIT0000000000000000000K1"))
        problems = store.check()["problems"]
        assert len(problems) == 1 and "run_01KIT0000000000000000000K1" in problems[0]

    def test_a_damaged_cache_value_is_a_miss_counted_in_damaged(self, store, tamper):
        store.cache_put_many("kit", [("k1", {"v": 1}), ("k2", {"v": 2})])
        tamper(store, "cache", "k1")
        assert store.cache_get_many("kit", ["k1", "k2"]) == {"k2": {"v": 2}}
        assert store.damaged == {"kit": 1}
        assert len(store.check()["problems"]) == 1

    # -- reading without writing ---------------------------------------------------------

    def test_a_read_only_handle_reads_and_cannot_write(self, open_store):
        writer = open_store()
        if not hasattr(writer, "read_only"):
            pytest.skip("the store has no read-only mode")
        writer.save_run(run_header("run_01KIT0000000000000000000L1", 2), case_records(2), SUMMARY)
        writer.cache_put_many("execution", [("k", 1)])
        reader = open_store()
        reader.read_only = True
        assert [h["id"] for h in reader.list_runs()] == ["run_01KIT0000000000000000000L1"]
        assert list(reader.run_cases("run_01KIT0000000000000000000L1")) == case_records(2)
        assert reader.cache_get_many("execution", ["k"]) == {"k": 1}
        with pytest.raises(OloproofError):
            reader.save_run(run_header("run_01KIT0000000000000000000L2", 1), case_records(1), SUMMARY)
        assert [h["id"] for h in writer.list_runs()] == ["run_01KIT0000000000000000000L1"]
