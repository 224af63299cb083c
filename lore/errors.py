"""The one exception tree of Lorekeeper.

Callers catch by role, not by backend. Transient errors may succeed when retried;
permanent ones never will, so workers retry only the former and the API maps each
class to one HTTP status (``api/errors.py``)::

    LoreError
    ├── PermanentError                  retrying cannot help
    │   ├── InvalidRequestError         the caller's input is wrong (HTTP 422)
    │   │   ├── FilterError             unknown filter key or operator, bad value type
    │   │   ├── PayloadTooLargeError    a request body over the limit (HTTP 413)
    │   │   └── DocumentRejectedError   empty, binary, undecodable or oversized input
    │   ├── NotFoundError               no such document, or not yours to see (HTTP 404)
    │   ├── UnauthorizedError           no key, or an unknown or revoked one (HTTP 401)
    │   ├── ForbiddenError              a valid key without the right (HTTP 403)
    │   ├── ConfigurationError          settings that cannot work together
    │   │   └── MissingExtraError       a chosen backend's optional driver is not installed
    │   ├── StorageError                a store file damaged, or a path of the wrong kind
    │   ├── EmbeddingMismatchError      the store was built with another embedding model
    │   └── LLMReplyError               the model's reply stayed invalid after repair and
    │                                   one re-prompt (the chunk is quarantined)
    └── TransientError                  may succeed later (HTTP 503)
        ├── TooManyRequestsError        a namespace's share of ingest is used (HTTP 429)
        ├── IndexRebuildingError        a search index is being rebuilt from the store
        │                               (HTTP 503 with Retry-After)
        └── BackendUnavailableError     a server (embedding endpoint, broker) did not answer
            └── LLMUnavailableError     the LLM endpoint failed its probe (nothing was
                                        written; documents stay searchable)
"""

from __future__ import annotations


class LoreError(Exception):
    """Root of every error Lorekeeper raises on purpose."""


class PermanentError(LoreError):
    """An error that retrying the same call cannot fix."""


class InvalidRequestError(PermanentError):
    """The caller's input is malformed or refers to something that does not exist."""


class FilterError(InvalidRequestError):
    """A metadata filter uses an unknown key, an unknown operator or a bad value."""


class PayloadTooLargeError(InvalidRequestError):
    """A request body is larger than the configured limit."""


class DocumentRejectedError(InvalidRequestError):
    """A document cannot be ingested: empty, binary, undecodable or too large."""


class NotFoundError(PermanentError):
    """The named document (or other resource) does not exist."""


class UnauthorizedError(PermanentError):
    """The request carries no API key, or one that is unknown or revoked."""


class ForbiddenError(PermanentError):
    """The key is valid but may not do this (e.g. an admin-only route)."""


class ConfigurationError(PermanentError):
    """Settings that cannot work, e.g. an unknown engine name."""


class MissingExtraError(ConfigurationError):
    """A backend chosen in settings needs an optional dependency that is not installed."""


class StorageError(PermanentError):
    """A file of the data directory cannot be used: damaged, truncated, or misplaced.

    A file where a directory belongs (or the reverse) is reported, never deleted.
    """


class EmbeddingMismatchError(PermanentError):
    """The configured embedder differs from the one the store's vectors were made with."""


class LLMReplyError(PermanentError):
    """A model's reply could not be parsed or validated, even after repair and a re-prompt."""


class TransientError(LoreError):
    """An error that may go away when the call is retried later."""


class BackendUnavailableError(TransientError):
    """A remote backend (embedding endpoint, broker, database) did not answer."""


class LLMUnavailableError(BackendUnavailableError):
    """The LLM endpoint cannot be reached (its probe failed before any graph work)."""


class TooManyRequestsError(TransientError):
    """A namespace holds its share of the ingest queue; retry after ``retry_after_s``."""

    def __init__(self, message: str, *, retry_after_s: int = 5) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class IndexRebuildingError(TransientError):
    """A search index is being rebuilt from the store; retry after ``retry_after_s``."""

    def __init__(self, message: str, *, retry_after_s: int = 5) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
