// Anchors the shared library target; every symbol comes from flashgen_core.
