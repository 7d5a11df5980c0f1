"""The engine behind ``oloproof``: hookspecs, plugin manager, model, config, runner, statistics,
gate and CLI. Users and plugins import the public names from ``oloproof``."""
