"""Layer 4, the plugin system: the hook specifications, the registries and the plugin manager."""
