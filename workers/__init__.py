"""Workers: builds the object graph from settings (and, later, the Celery tasks)."""
