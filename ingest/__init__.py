"""Ingestion: loaders, chunking and the pipeline that stores chunks with their vectors."""
