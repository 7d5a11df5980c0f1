"""Layer 2, the statistics: intervals, confidence sequences, agreement, units of analysis, tallies,
and how their numbers are printed. Imports only the model."""
