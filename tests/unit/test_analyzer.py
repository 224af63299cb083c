import pytest

from retrieval.analyzer import Analyzer, AnalyzerConfig, _pieces, _split_identifier


@pytest.fixture(scope="module")
def analyzer() -> Analyzer:
    return Analyzer()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("max_connections", {"max_connections", "max", "connect"}),
        ("ERR_CONN_RESET", {"err_conn_reset", "err", "conn", "reset"}),
        ("TokenRefresher", {"tokenrefresher", "token", "refresh"}),
        (
            "pool.idle_timeout_ms",
            {"pool.idle_timeout_ms", "pool", "idle_timeout_ms", "idl", "timeout", "ms"},
        ),
        ("HTTP 504", {"http", "504"}),
        ("PAY-4012", {"pay-4012", "pay", "4012"}),
    ],
)
def test_identifiers_whole_and_in_parts(analyzer: Analyzer, text: str, expected: set[str]) -> None:
    assert set(analyzer.tokens(text)) == expected


def test_whole_identifier_is_never_stemmed_or_dropped(analyzer: Analyzer) -> None:
    tokens = analyzer.tokens("is_running TokenRefresher.rotate_keys")
    assert "is_running" in tokens
    assert "tokenrefresher" in tokens  # compound part kept whole
    assert "tokenrefresher.rotate_keys" in tokens
    assert "is" not in tokens  # a stopword part is dropped


def test_query_identifier_matches_inside_a_longer_identifier(analyzer: Analyzer) -> None:
    doc = set(analyzer.tokens("call TokenRefresher.rotate_keys now"))
    assert set(analyzer.query_terms("TokenRefresher")) <= doc
    assert set(analyzer.query_terms("rotate_keys")) <= doc


def test_stemming_and_stopwords_are_options() -> None:
    plain = Analyzer(AnalyzerConfig(stemming=False, stopwords=False))
    assert plain.tokens("The connections") == ["the", "connections"]
    assert Analyzer().tokens("The connections") == ["connect"]
    assert plain.config.key() != Analyzer().config.key()


def test_query_terms_are_distinct_in_order(analyzer: Analyzer) -> None:
    assert analyzer.query_terms("timeout TIMEOUT timeouts") == ["timeout"]


@pytest.mark.parametrize(
    ("query", "identifiers", "dominant"),
    [
        ("E_LEDGER_LOCK_TIMEOUT", ["e_ledger_lock_timeout"], True),
        ("HTTP 429 quota_exceeded", ["429", "quota_exceeded"], True),
        ("ORA-00060", ["ora-00060"], True),
        ("E11000 duplicate key", ["e11000"], False),
        ("0x8007000E", ["0x8007000e"], True),
        ("42P01", ["42p01"], True),
        ("errno 1205", ["1205"], True),
        ("python 3.11.2", ["3.11.2"], True),
        ("--fixed-value", ["--fixed-value"], True),
        ("--limit", ["--limit"], True),
        ("what does --limit do", ["--limit"], True),
        ("__getattr__", ["__getattr__"], True),
        ("export-subst", ["export-subst"], True),  # one hyphenated token alone: pasted
        ("PYTHONTHREADDEBUG", ["pythonthreaddebug"], True),  # one token, no word: pasted
        ("macOS", ["macos"], True),
        ("CPython", ["cpython"], True),
        ("Windows", [], False),  # a capitalised word is a word
        ("timeout", [], False),
        ("is PYTHONPATH read", [], False),  # in a sentence: a word of it
        ("json.dumps()", ["json.dumps"], True),
        ("what does dumps() do", ["dump"], True),
        ("in the 10th of 64bit builds taking 100ms", [], False),
        ("Which services use PostgreSQL and IoT?", [], False),
        ("PAY-4012", ["pay-4012"], True),
        ("TokenRefresher.rotate_keys", ["tokenrefresher.rotate_keys"], True),
        ("/etc/quillfeather/sync.toml", ["etc/quillfeather/sync.toml"], True),
        ("why do read-only replicas lag", [], False),
        (
            "Pretreatment with the Arp2/3 inhibitor changes lamellipodia formation",
            ["arp2/3"],
            False,
        ),
    ],
)
def test_identifiers_and_their_share(
    analyzer: Analyzer, query: str, identifiers: list[str], dominant: bool
) -> None:
    found, share = analyzer.identifiers(query)
    assert found == identifiers
    assert (share >= 0.5) is dominant


PLAIN = [
    "word",
    "Word",
    "WORD",
    "A",
    "x",
    "123",
    "abc123",
    "123abc",
    "Abc123",
    "iPhone",
    "macOS",
    "Zürich",
    "ÅSTRÖM",
    "Straße",
    "ΣΑΣ",
    "aΣ",
    "İstanbul",
    "ǅungla",
    "ﬁle",
    "Ⅻ",
    "²",
    "१२३",
    "HTTPServer",
    "ORA",
    "E11000",
    "0x8007000E",
    "ab_cd",
    "--flag",
    "__init__",
    "v1.2.3",
]


@pytest.mark.parametrize("token", PLAIN)
def test_the_plain_word_shortcut_splits_as_the_general_rules(token: str) -> None:
    assert _split_identifier(token) == _pieces(token)


def test_terms_are_remembered_per_token_and_the_memory_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    analyzer = Analyzer()
    monkeypatch.setattr("retrieval.analyzer._EXPANDED_MAX", 3)
    first = analyzer.tokens("Timeouts retried: retry_after_ms, timeouts")
    assert first == analyzer.tokens("Timeouts retried: retry_after_ms, timeouts")
    assert len(analyzer._expanded) <= 3
    many = " ".join(f"word{i}" for i in range(50))
    assert analyzer.tokens(many) == [f"word{i}" for i in range(50)]
    assert len(analyzer._expanded) <= 3
    long = "a" * 500
    assert analyzer.tokens(long) == analyzer.tokens(long[:120])  # the first 120 characters
