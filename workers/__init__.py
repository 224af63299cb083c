"""Workers: composition root, the one ingest entry point, graph refresh, Celery tasks."""
