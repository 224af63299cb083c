"""Lorekeeper kernel: settings, errors, shared models, the store and the embedders.

Every other package imports from here; this package imports none of them.
"""

__version__ = "0.1.0"
