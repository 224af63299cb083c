"""Adapters: the ``lore`` CLI and the FastAPI app. Thin wrappers over ``app.runtime``."""
