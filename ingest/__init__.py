"""Ingestion: loaders, chunking, the store pipeline, graph extraction and refresh."""
