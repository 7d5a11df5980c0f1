"""Layer 9, what a command does beyond one run: the project, the Python API, diagnosis, judge validation."""
