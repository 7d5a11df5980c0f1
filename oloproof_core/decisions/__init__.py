"""Layer 7, decisions on summaries: the written gate policy and the comparison of two runs."""
