"""The chrome count of bench.doc_tree_chrome: repeats amid content and links inside code."""

from __future__ import annotations

from pathlib import Path

from bench.doc_tree_chrome import chunk_figures, outside_code

FOOTER = "Copyright 2001 the authors. All rights reserved by the foundation of this site."
SHARED = "--stat shows a diffstat of the changes, one line per file, with a graph of the size."
LINKS = '<a href="a.html">alpha</a> <a href="b.html">beta</a> <a href="c.html">gamma</a>'


def _tree(tmp_path: Path, pages: int) -> dict[str, list[str]]:
    chunks: dict[str, list[str]] = {}
    for n in range(pages):
        name = f"p{n}.html"
        (tmp_path / name).write_text(f"<html><body><p>{LINKS}</p></body></html>")
        chunks[name] = [f"Page {n} opens with words of its own.", SHARED, f"Page {n} ends.", FOOTER]
    chunks["p0.html"].insert(1, "```\nalpha beta gamma\n```")
    chunks["p1.html"].insert(1, "alpha beta gamma")
    return chunks


def test_a_shared_section_amid_a_page_is_told_apart_from_a_footer(tmp_path: Path) -> None:
    figures = chunk_figures(_tree(tmp_path, 6), tmp_path)
    assert figures["boilerplate_repeated"] == 12  # the shared section and the footer, 6 pages
    assert figures["repeated_amid_content"] == 6  # only the shared section
    assert figures["boilerplate_link_text"] == 2
    assert figures["link_text_in_code"] == 1  # the fenced one; the prose link list stays
    assert figures["chrome_share"] == round((6 + 1) / figures["chunks"], 4)


def test_code_is_left_out_of_the_words_a_link_share_reads() -> None:
    assert outside_code("see `open()` and\n```\nx = 1\n```\nthen").split() == ["see", "and", "then"]


def test_a_link_dense_declaration_of_api_names_is_counted_apart(tmp_path: Path) -> None:
    api = " ".join(f'<a href="{n}.html">{n}</a>' for n in ("SDL_AudioSpec", "Uint8", "SDL_Rect"))
    (tmp_path / "api.html").write_text(f"<html><body><p>{LINKS} {api}</p></body></html>")
    chunks = {
        "api.html": [
            "An overview of the audio functions, in words of its own that are long enough.",
            "SDL_AudioSpec open Uint8 SDL_Rect",  # a declaration: its links name the API
            "alpha beta gamma",  # a bar of plain links: chrome
        ]
    }
    figures = chunk_figures(chunks, tmp_path)
    assert figures["boilerplate_link_text"] == 2
    assert figures["link_text_api"] == 1
    assert figures["chrome_share"] == round(1 / 3, 4)


def test_retention_leaves_out_a_listing_s_line_numbers_drawn_in_a_cell(tmp_path: Path) -> None:
    listing = (
        "<table><tr><td><pre>1\n2\n3</pre></td><td><pre>static void\nbake (Cake *c);\n}</pre>"
        "</td></tr><tr><td>10</td><td>a ranked row keeps its number</td></tr></table>"
    )
    (tmp_path / "l.html").write_text(f"<html><body>{listing}</body></html>")
    stored = {"l.html": ["```\nstatic void\nbake (Cake *c);\n}\n```", "| 10 | a ranked row |"]}
    assert chunk_figures(stored, tmp_path)["retention"] == 1.0
    stored = {"l.html": ["```\nstatic void\nbake (Cake *c);\n}\n```"]}  # the ranked row lost
    assert chunk_figures(stored, tmp_path)["retention"] < 1.0


def test_retention_reads_headings_and_leaves_out_other_pages_titles(tmp_path: Path) -> None:
    # a DocBook footer names the previous page as text; the page's own title is a heading
    (tmp_path / "a.html").write_text("<html><title>1.1. Alpha</title><body>x</body></html>")
    (tmp_path / "b.html").write_text(
        "<html><title>1.2. Beta</title><body><table><tr><th>1.2. Beta</th></tr></table>"
        "<table><tr><td>1.1. Alpha</td><td>Home</td></tr></table>"
        "<table><tr><td>retry_limit</td><td>3</td></tr></table></body></html>"
    )
    stored = {"a.html": ["x"], "b.html": ["| retry_limit | 3 |"]}
    headings = {"a.html": ["1.1. Alpha"], "b.html": ["1.2. Beta\n1.2. Beta"]}
    assert chunk_figures(stored, tmp_path, headings=headings)["retention"] == 1.0
    assert chunk_figures(stored, tmp_path)["retention"] < 1.0  # the title is in no chunk text
    stored["b.html"] = ["Beta"]  # the setting's row lost
    assert chunk_figures(stored, tmp_path, headings=headings)["retention"] < 1.0


def test_a_bar_of_page_titles_between_a_few_links_is_counted_as_chrome(tmp_path: Path) -> None:
    for name, title in (("a.html", "1.1. Alpha setup"), ("b.html", "1.2. Beta tuning")):
        (tmp_path / name).write_text(
            f"<html><title>{title}</title><body><a href='x.html'>Prev</a> "
            "<a href='y.html'>Next</a><a href='z.html'>Home</a></body></html>"
        )
    (tmp_path / "c.html").write_text("<html><title>Chapter 1. Setup</title><body></body></html>")
    bar = "| 1.2. Beta tuning | | |\n| Prev | Chapter 1. Setup | Next |"
    prose = "Beta tuning raises the pool size when the queue grows, see Chapter 1. Setup first."
    figures = chunk_figures({"b.html": [bar, prose], "c.html": ["Setup words."]}, tmp_path)
    assert figures["boilerplate_link_text"] == 0  # two links: no link bar by links alone
    assert figures["boilerplate_title_text"] == 1  # the bar; the prose naming a title stays
    assert figures["chrome_share"] == round(1 / 3, 4)
