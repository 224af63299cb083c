"""Prompts as code: one module per LLM task, each next to the pydantic model of its reply.

Every module exposes ``TASK`` (its name, also the first line of the system prompt, so a
cache key or a test server can tell tasks apart), ``Reply`` and ``render(...)`` returning
a :class:`lore.llm.ChatPrompt`.
"""
