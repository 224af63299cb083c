"""Retrieval: analyzers, sparse and dense indexes, metadata filters, fusion, hybrid search."""
