"""Layer 8, the engine: loading a suite, executing and recording cases, judging, caching, fingerprints."""
