"""The store conformance kit (a pytest test class): ``from oloproof.testing import StoreContract``.

Import it from a store package's tests only; it needs pytest. docs/stores.md describes it.
"""

from oloproof_core.storage.contract import SUMMARY, StoreContract, case_records, run_header

__all__ = ["SUMMARY", "StoreContract", "case_records", "run_header"]
