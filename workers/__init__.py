"""Celery alone: the app, the tasks and the sending side; imports ``app``, never the reverse."""
