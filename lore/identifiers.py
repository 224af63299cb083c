"""What an identifier is: the one definition the analyzer, the router and ingest share.

A token of technical text (``TOKEN``: letters and digits joined by ``._-/:@``, with a
``--flag``'s dashes or a ``__dunder__``'s underscores) is an *identifier* when its shape
says it names something rather than being a word (:func:`identifier_kind`): the
exact-match vote, the router's cues, the defining-chunk signal and the HTML converter's
test for a link that names an API all read this one definition.
"""

from __future__ import annotations

import re

TOKEN = re.compile(
    r"(?:(?<![\w\-])-{1,2}(?=[A-Za-z])|(?<!\w)__(?=[0-9A-Za-z]))?"  # --flag, __dunder__
    r"[0-9A-Za-z\u00C0-\uFFFF]+(?:[._\-/:@][0-9A-Za-z\u00C0-\uFFFF]+)*(?:__(?!\w))?"
)
MAX_TOKEN_CHARS = 120
# snake_case, dotted.names, versions, paths, host:port, user@host
_CODE_SEP = re.compile(r"[_./:@]")
# camelCase / CamelCase inside a word (TokenRefresher, etcdMembersDown)
_INNER_CAPS = re.compile(r"[a-z][A-Z]")
# a product name ending in capitals (PostgreSQL, GraphQL) is a name, not code
_PRODUCT = re.compile(r"[A-Z][a-z]+[A-Z]{2,}")
# letters and digits mixed, with enough digits to be a code: E11000, ORA-00060, PAY-4012
_LETTER_DIGIT_CODE = re.compile(r"(?=.*[A-Za-z])(?=(?:.*\d){3})[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*")
# a code opening with digits: 0x8007000E, 42P01, 2BP01 (not 10th, 64bit, 100ms)
_DIGIT_FIRST_CODE = re.compile(r"0[xX][0-9A-Fa-f]+|\d+[A-Za-z]+\d[A-Za-z0-9]*")
_MEASURE = re.compile(r"\d+(?:[A-Za-z]{1,3})?")  # 504, 100ms, 64bit are no letter codes
_NUMBER_CODE = re.compile(r"\d{3,}")  # HTTP statuses, OS and database error numbers
_MIN_CAMEL_CHARS = 6


def pasted_name(token: str) -> bool:
    """Whether a query that is this one token names something rather than says a word.

    Hyphenated (``export-subst``) or with a capital after its first letter (``PYTHONPATH``,
    ``macOS``, ``CPython``, ``IPv6``): no English word is written so. A word in lower
    case or capitalised ("timeout", "Windows") is a word.
    """
    bare = token.lstrip("-")
    return "-" in bare or any(ch.isupper() for ch in bare[1:])


def identifier_kind(raw: str, before: str = "", after: str = "") -> str | None:
    """What kind of identifier the token ``raw`` is, or None for a word or a short number.

    The one definition of "identifier" shared by the exact-match vote, the router and the
    defining-chunk signal (``retrieval.defines``). ``before`` and ``after`` are the
    characters around the token in its text: a leading ``-``/``--`` makes a command-line
    flag, a following ``(`` a call. Kinds: ``flag``, ``call``, ``code`` (letters and
    digits: ``ORA-00060``, ``E11000``, ``0x8007000E``, ``42P01``), ``number`` (three or
    more digits: ``504``, ``1205``), ``version`` (``3.11.2``), ``path`` (dotted, slashed
    or colon names, ``snake_case``) and ``camel`` (``TokenRefresher``; not short
    mixed-case words such as ``IoT`` nor product names such as ``PostgreSQL``).
    """
    if len(raw) < 2:
        return None
    if (before.endswith("-") and raw[0].isalpha()) or (raw[0] == "-" and len(raw) > 2):
        return "flag"
    if after.startswith("(") and raw[0].isalpha():
        return "call"
    if _DIGIT_FIRST_CODE.fullmatch(raw) or (
        _LETTER_DIGIT_CODE.fullmatch(raw) and not _MEASURE.fullmatch(raw)
    ):
        return "code"
    if _NUMBER_CODE.fullmatch(raw):
        return "number"
    if re.fullmatch(r"\d+(?:\.\d+)+[A-Za-z0-9]*", raw):
        return "version"
    if _CODE_SEP.search(raw):
        return "path"
    if _INNER_CAPS.search(raw) and len(raw) >= _MIN_CAMEL_CHARS and not _PRODUCT.fullmatch(raw):
        return "camel"
    return None
