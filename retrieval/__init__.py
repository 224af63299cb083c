"""Retrieval: indexes and their lifecycle, filters, fusion, hybrid/global search, router."""
