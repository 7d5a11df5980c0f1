"""Layer 12, the web viewer: a read-only server of the store's runs, cases, comparisons and diagnoses
(``server``), its ``view`` command (``command``) and the ``html`` reporter (``reporter``)."""
