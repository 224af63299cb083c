from pathlib import Path

import pytest

from ingest.loaders import load_paths, split_front_matter
from lore.models import Rejected, Skipped, SourceDocument

LIMIT = 10_000


def _load(tmp_path: Path, **kw: object) -> dict[str, SourceDocument | Rejected]:
    items = load_paths(
        [tmp_path],
        include=["*.md", "*.txt", "*.html", "*.jsonl"],
        exclude=kw.pop("exclude", []),  # type: ignore[arg-type]
        max_bytes=LIMIT,
        extra_metadata=kw.pop("meta", None),
    )  # type: ignore[arg-type]
    return {Path(i.source).name if "#" not in i.source else i.id: i for i in items}


def test_markdown_front_matter_title_and_run_metadata(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\nservice: pay\ntags: [x, y]\n---\n# Title here\n\nBody.\n")
    doc = _load(tmp_path, meta={"env": "prod", "service": "override"})["a.md"]
    assert isinstance(doc, SourceDocument)
    assert doc.title == "Title here"
    assert doc.metadata == {
        "service": "override",
        "tags": ["x", "y"],
        "env": "prod",
        "path": "a.md",
        "dir": ".",
        "ext": "md",
    }
    assert doc.id == f"{tmp_path.name}/a.md"  # the directory's name labels its root
    assert not doc.text.startswith("---")


def test_html_visible_text_only(tmp_path: Path) -> None:
    (tmp_path / "p.html").write_text(
        "<html><head><title>T</title><style>.x{color:red}</style>"
        "<script>secret_js()</script></head><body><h2>Sub</h2><p>Seen text</p></body></html>"
    )
    doc = _load(tmp_path)["p.html"]
    assert isinstance(doc, SourceDocument)
    assert doc.title == "T"
    assert "## Sub" in doc.text and "Seen text" in doc.text
    assert "secret_js" not in doc.text and "color" not in doc.text


def test_an_html_page_of_headings_and_navigation_alone_is_skipped(tmp_path: Path) -> None:
    # a generated index: its entries are links in a navigation block, its footer repeats
    footer = "<footer><p>Copyright 2026 The Project. Licensed under the MIT licence.</p></footer>"
    (tmp_path / "genindex.html").write_text(
        "<html><head><title>Index</title></head><body><h1>Index</h1><h2>A</h2>"
        '<nav><ul><li><a href="a.html">abs()</a></li><li><a href="b.html">all()</a></li>'
        f"</ul></nav>{footer}</body></html>"
    )
    for name in ("a", "b"):
        (tmp_path / f"{name}.html").write_text(
            f"<html><head><title>{name}</title></head><body><h1>{name}()</h1>"
            f"<p>Returns what {name} computes.</p>{footer}</body></html>"
        )
    (tmp_path / "short.html").write_text("<html><body><h1>Short</h1><p>One line.</p></body></html>")
    (tmp_path / "toc.html").write_text(  # a table of contents and nothing else (Node.js's)
        '<html><head><title>Index</title></head><body><div id="column2"><ul>'
        + "".join(f'<li><a href="{n}.html">{n} module</a></li>' for n in "abcdefgh")
        + "</ul></div></body></html>"
    )
    loaded = _load(tmp_path)
    skipped = loaded["genindex.html"]
    assert isinstance(skipped, Skipped) and "headings only" in skipped.reason
    toc = loaded["toc.html"]
    assert isinstance(toc, Skipped) and "navigation only" in toc.reason
    assert all(isinstance(loaded[f"{n}.html"], SourceDocument) for n in ("a", "b", "short"))


def test_a_redirect_stub_is_skipped_and_a_page_that_refreshes_itself_is_not(
    tmp_path: Path,
) -> None:
    head = "<html><head><title>{t}</title>{meta}</head><body>{body}</body></html>"
    (tmp_path / "stub.html").write_text(
        head.format(
            t="XREFabs",
            meta="<META content='0; URL=Numbers.html#abs' HTTP-EQUIV=Refresh>",
            body='<p>The node you are looking for is at <a href="Numbers.html">abs</a>.</p>',
        )
    )
    long = " ".join(["Numbers are added, multiplied and compared as the sections say."] * 8)
    (tmp_path / "moved.html").write_text(
        head.format(
            t="Moved",
            meta='<meta http-equiv="refresh" content="0;url=new.html">',
            body=f"<p>{long}</p>",
        )
    )
    (tmp_path / "board.html").write_text(
        head.format(
            t="Board",
            meta='<meta http-equiv="refresh" content="30">',
            body="<p>Build status of every branch.</p>",
        )
    )
    loaded = _load(tmp_path)
    stub = loaded["stub.html"]
    assert isinstance(stub, Skipped) and "redirect" in stub.reason
    assert "Numbers.html#abs" in stub.reason
    # a page with text of its own, and a page that only reloads itself, are pages
    assert isinstance(loaded["moved.html"], SourceDocument)
    assert isinstance(loaded["board.html"], SourceDocument)


def test_jsonl_records_and_bad_lines(tmp_path: Path) -> None:
    (tmp_path / "r.jsonl").write_text(
        '{"_id": "d1", "title": "One", "text": "alpha", "severity": "high", '
        '"metadata": {"team": "x"}, "nested": {"ignored": 1}}\n'
        '{"id": 7, "text": "beta"}\n'
        "{broken\n"
        '{"id": "d3"}\n'
        '{"id": "d1", "text": "dup"}\n'
        '{"id": "d4", "text": "   "}\n'
    )
    got = _load(tmp_path)
    d1 = got["d1"]
    assert isinstance(d1, SourceDocument)
    assert d1.metadata == {
        "severity": "high",
        "team": "x",
        "path": "r.jsonl",
        "dir": ".",
        "ext": "jsonl",
    }
    assert d1.source.endswith("r.jsonl#d1")
    assert isinstance(got["7"], SourceDocument)
    reasons = [i.reason for i in got.values() if isinstance(i, Rejected)]
    assert any("not valid JSON" in r for r in reasons)
    assert any("'text' must be a string" in r for r in reasons)
    assert any("empty" in r for r in reasons)
    dup = [
        i
        for i in load_paths([tmp_path / "r.jsonl"], include=[], exclude=[], max_bytes=LIMIT)
        if isinstance(i, Rejected) and "duplicate" in i.reason
    ]
    assert len(dup) == 1


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("bin.md", b"abc\x00def", "binary"),
        ("utf16.txt", "plain words, many of them".encode("utf-16"), "binary"),
        ("late.txt", b"x" * 9000 + b"\x00" * 10, "binary"),  # past the sniffed start
        ("empty.txt", b"", "empty"),
        ("blank.md", b"  \n\n ", "empty"),
        ("latin.txt", "caf\u00e9".encode("latin-1"), "not UTF-8"),
        ("big.txt", b"x" * (LIMIT + 1), "limit"),
        ("doc.pdf", b"%PDF-1.4", "unsupported file type"),
    ],
)
def test_bad_files_are_rejected_with_reason(
    tmp_path: Path, name: str, content: bytes, reason: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    (item,) = list(load_paths([path], include=["*"], exclude=[], max_bytes=LIMIT))
    assert isinstance(item, Rejected)
    assert reason in item.reason


def test_a_stray_nul_in_a_text_page_is_shown_as_a_replacement_character(tmp_path: Path) -> None:
    # an API reference documents the NUL constant with the character itself: still text
    words = " ".join(f"word{i}" for i in range(400))
    page = f"<html><title>CharUtils</title><body><p>{words}</p>"
    page += "<dl><dt>NUL</dt><dd><code>\x00</code> null control character</dd></dl></body>"
    (tmp_path / "CharUtils.html").write_text(page)
    (tmp_path / "notes.md").write_text(f"# Notes\n\n{words}\n\nThe byte `\x00` ends it.\n")
    got = _load(tmp_path)
    for name in ("CharUtils.html", "notes.md"):
        doc = got[name]
        assert isinstance(doc, SourceDocument), doc
        assert "\x00" not in doc.text and "\ufffd" in doc.text


def test_directory_walk_include_exclude_and_missing(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "keep.md").write_text("# K\n\nkeep")
    (tmp_path / "sub" / "skip.md").write_text("# S\n\nskip")
    (tmp_path / "notes.csv").write_text("a,b")
    got = _load(tmp_path, exclude=["sub/skip.md"])
    assert set(got) == {"keep.md"}
    (missing,) = list(load_paths([tmp_path / "nope"], include=["*"], exclude=[], max_bytes=1))
    assert isinstance(missing, Rejected) and "no such file" in missing.reason


def test_front_matter_absent() -> None:
    assert split_front_matter("# just text") == ({}, "# just text")


def test_front_matter_title_crlf_and_include_by_path(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.md").write_bytes(
        b"---\r\ntitle: Given Title\r\nteam: a\r\n---\r\n# H\r\n\r\nbody"
    )
    (tmp_path / "d" / "y.md").write_text("# Other\n\nbody")
    (tmp_path / "old.txt").write_bytes(b"line one\rline two")
    items = list(load_paths([tmp_path], include=["d/x.md", "*.txt"], exclude=[], max_bytes=LIMIT))
    by_name = {Path(i.source).name: i for i in items}
    assert set(by_name) == {"x.md", "old.txt"}
    doc = by_name["x.md"]
    assert isinstance(doc, SourceDocument)
    assert doc.title == "Given Title"
    assert doc.metadata == {"team": "a", "path": "d/x.md", "dir": "d", "ext": "md"}
    assert "\r" not in doc.text
    old = by_name["old.txt"]
    assert isinstance(old, SourceDocument) and old.text == "line one\nline two"


def test_gzip_compressed_pages_are_read_as_their_inner_type(tmp_path: Path) -> None:
    # Debian ships documentation compressed (fs.md.gz); the default include takes it
    import gzip

    from ingest.loaders import load_upload
    from lore.settings import IngestSettings

    (tmp_path / "fs.md.gz").write_bytes(gzip.compress(b"# File system\n\nfs.watch() watches."))
    (tmp_path / "page.html.gz").write_bytes(
        gzip.compress(b"<html><title>Streams</title><body><p>Readable streams.</p></body>")
    )
    (tmp_path / "bomb.txt.gz").write_bytes(gzip.compress(b"x" * (LIMIT * 50)))
    (tmp_path / "broken.md.gz").write_bytes(b"\x1f\x8b\x08\x00 not really gzip")
    (tmp_path / "records.jsonl.gz").write_bytes(gzip.compress(b'{"id": "1", "text": "t"}\n'))
    (tmp_path / "changelog.gz").write_bytes(gzip.compress(b"v1: first"))
    include = IngestSettings().include
    items = load_paths([tmp_path], include=include, exclude=[], max_bytes=LIMIT)
    got = {Path(i.source).name: i for i in items}
    assert set(got) == {"fs.md.gz", "page.html.gz", "bomb.txt.gz", "broken.md.gz"}
    fs, page = got["fs.md.gz"], got["page.html.gz"]
    assert isinstance(fs, SourceDocument) and fs.title == "File system"
    assert "fs.watch() watches." in fs.text and fs.metadata["ext"] == "md"
    assert isinstance(page, SourceDocument) and page.title == "Streams"
    assert "Readable streams." in page.text
    bomb, broken = got["bomb.txt.gz"], got["broken.md.gz"]
    assert isinstance(bomb, Rejected) and "decompressed" in bomb.reason
    assert isinstance(broken, Rejected) and "gzip" in broken.reason
    for name, reason in (("records.jsonl.gz", "decompress it first"), ("changelog.gz", "'.gz'")):
        (item,) = list(load_paths([tmp_path / name], include=["*"], exclude=[], max_bytes=LIMIT))
        assert isinstance(item, Rejected) and reason in item.reason, item
    raw = gzip.compress(b"# Upload\n\nsent compressed")
    (upload,) = list(load_upload("notes.md.gz", raw, doc_id="n", max_bytes=LIMIT))
    assert isinstance(upload, SourceDocument) and upload.title == "Upload"
