"""Front matter, HTML conversion and structure-keeping chunking on inputs we write."""

import pytest

from ingest.chunking import chunk_text
from ingest.front_matter import FrontMatterError, split_front_matter
from ingest.html import html_to_markdown
from lore.tokens import WordPieceCounter, counter_for, packaged_model_dir


@pytest.fixture(scope="module")
def counter() -> WordPieceCounter:
    return counter_for(packaged_model_dir())


def test_yaml_front_matter_lists_dates_nested_maps() -> None:
    text = (
        "---\n"
        "title: 'Quoted: title'\n"
        "aliases:\n  - /kubememquotaovercommit/\n  - /old/\n"
        "date: 2024-03-05\n"
        "draft: false\n"
        "params:\n  service: pay\n  k8s: {namespace: prod}\n"
        "authors: [{name: Ann}, {name: Bo, mail: bo@x}]\n"
        "empty:\n"
        "---\n# Body\n"
    )
    meta, body, had = split_front_matter(text)
    assert had and body == "# Body\n"
    assert meta == {
        "title": "Quoted: title",
        "aliases": ["/kubememquotaovercommit/", "/old/"],
        "date": "2024-03-05",
        "draft": False,
        "params.service": "pay",
        "params.k8s.namespace": "prod",
        "authors.name": ["Ann", "Bo"],
        "authors.mail": ["bo@x"],
    }


def test_toml_front_matter_and_no_front_matter() -> None:
    meta, body, had = split_front_matter('+++\ntitle = "T"\ntags = ["a", "b"]\n+++\nbody')
    assert (meta, body, had) == ({"title": "T", "tags": ["a", "b"]}, "body", True)
    assert split_front_matter("# plain\n\n---\nnot: front matter\n---\n")[2] is False
    assert split_front_matter("---\n---\n") == ({}, "", True)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("---\ntags: [a, b\n---\nbody", "invalid YAML front matter at line"),
        ("---\n- a\n- b\n---\nbody", "must be a map"),
        ("+++\ntitle = \n+++\nbody", "invalid TOML front matter"),
    ],
)
def test_invalid_front_matter_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(FrontMatterError, match=message):
        split_front_matter(text)


def test_html_keeps_structure_and_drops_chrome() -> None:
    title, body = html_to_markdown(
        "<html><head><title>T</title><script>evil()</script></head><body>"
        "<header>site banner</header><nav>menu</nav><aside>related</aside>"
        "<div role='navigation'>crumbs</div>"
        "<article><header><h1>Real title</h1></header>"
        "<p>Call <code>retry_backoff_ms</code> with <a href='/x'>the docs</a>.</p>"
        "<pre>def f():\n    return 1\n</pre>"
        "<ul><li>one</li><li>two</li></ul>"
        "<table><tr><td>a|b</td><td>c</td></tr><tr><td>d</td><td>e</td></tr></table>"
        "</article><footer>copyright</footer></body></html>"
    )
    assert title == "T"
    assert "# Real title" in body
    assert "`retry_backoff_ms`" in body and "the docs" in body and "/x" not in body
    assert "```\ndef f():\n    return 1\n```" in body
    assert "- one\n- two" in body
    assert "| a\\|b | c |\n| --- | --- |\n| d | e |" in body
    for chrome in ("evil", "site banner", "menu", "related", "crumbs", "copyright"):
        assert chrome not in body


def test_html_single_main_and_code_fences_with_backticks() -> None:
    title, body = html_to_markdown(
        "<body><div>outside</div><main><h2>Inside</h2>"
        "<pre><code class='language-md'>```\nnested\n```</code></pre></main></body>"
    )
    assert title == "" and "outside" not in body
    assert "````md\n```\nnested\n```\n````" in body


def test_tables_and_code_stay_whole_when_they_fit(counter: WordPieceCounter) -> None:
    table = "| alert | team |\n| --- | --- |\n" + "".join(
        f"| Alert{i} | team-{i} |\n" for i in range(8)
    )
    prose = " ".join(f"Sentence number {i} about the service." for i in range(30))
    text = f"# Doc\n\n{prose}\n\n{table}\n{prose}\n"
    chunks = chunk_text(text, counter, size=120, overlap=16)
    holding = [c.text for c in chunks if "| Alert0 |" in c.text]
    assert len(holding) == 1 and "| Alert7 | team-7 |" in holding[0]
    assert holding[0].count("| --- | --- |") == 1


def test_oversized_tables_and_code_split_between_rows_with_their_frame(
    counter: WordPieceCounter,
) -> None:
    rows = "".join(f"| Alert{i} | team-{i} | runbook for alert number {i} |\n" for i in range(60))
    table = "| alert | team | notes |\n| --- | --- | --- |\n" + rows
    code = "```python\n" + "".join(f"value_{i} = compute({i})\n" for i in range(80)) + "```"
    chunks = chunk_text(f"# T\n\n{table}\n{code}\n", counter, size=100, overlap=16)
    table_chunks = [c.text for c in chunks if "| Alert" in c.text]
    code_chunks = [c.text for c in chunks if "value_" in c.text]
    assert len(table_chunks) > 1 and len(code_chunks) > 1
    assert all(t.startswith("| alert | team | notes |\n| --- |") for t in table_chunks)
    assert all(c.startswith("```python\n") and c.endswith("\n```") for c in code_chunks)
    assert all(c.token_count <= 100 for c in chunks)
    seen = "\n".join(table_chunks)
    assert all(f"| Alert{i} |" in seen for i in range(60))  # every row kept
    assert all(f"value_{i} = compute" in "\n".join(code_chunks) for i in range(80))
