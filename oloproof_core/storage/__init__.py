"""Layer 6, storage: run records and their seals, opening a store, the cache writer, the store contract."""
