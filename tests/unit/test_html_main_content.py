"""Main-content extraction: navigation drawn by common generators goes, content stays."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from ingest.boilerplate import RepeatedBlocks
from ingest.html import html_to_markdown
from ingest.loaders import load_paths
from lore.models import SourceDocument

DOCBOOK = """<html><body>
<div class="navheader"><table width="100%"><tr><th colspan="3">Chapter 2. Setup</th></tr>
<tr><td><a href="ch01.html">Prev</a></td><th>Part I</th><td><a href="ch03.html">Next</a></td></tr>
</table><hr></div>
<div class="chapter"><h2>Chapter 2. Setup</h2>
<div class="toc"><p><b>Table of Contents</b></p><dl><dt><a href="#a">Installing the server</a></dt>
<dt><a href="#b">Configuring the listener</a></dt></dl></div>
<p>Install the package and run the setup tool before the first start of the daemon.</p>
<dl><dt>listen_port</dt><dd><p>The TCP port the daemon listens on.</p></dd></dl>
<pre>setup --init</pre></div>
<div class="navfooter"><hr><table><tr><td><a href="ch01.html">Prev</a></td>
<td><a href="index.html">Up</a></td><td><a href="ch03.html">Next</a></td></tr>
<tr><td>Chapter 1. Intro</td><td><a href="index.html">Home</a></td><td>Chapter 3. Use</td></tr>
</table></div></body></html>"""

TEXINFO = """<html><body><div class="nav-panel"><p>Next: <a href="n.html">Nodes</a>,
Previous: <a href="p.html">Intro</a>, Up: <a href="index.html">Top</a> &nbsp;
[<a href="toc.html">Contents</a>][<a href="ix.html">Index</a>]</p></div><hr>
<h3 class="section">2.1 Overview</h3><p>The overview explains how nodes are linked
together in a manual and why every node has a name.</p></body></html>"""

SPHINX_TOCTREE = """<html><body><div class="body"><h1>Library</h1>
<p>The library reference describes the modules that ship with the interpreter.</p>
<div class="toctree-wrapper"><ul><li><a href="a.html"><code>json</code> — JSON encoder</a></li>
<li><a href="b.html"><code>csv</code> — CSV files</a></li></ul></div>
<p>See <a href="a.html"><code>json.dumps()</code></a> and
<a href="b.html"><code>csv.reader()</code></a>.</p>
<h2>Functions<a class="headerlink" href="#functions">¶</a></h2>
<p>Text.</p>
<h2>See also</h2><p><a href="x.html">git-log(1)</a>, <a href="y.html">git-show(1)</a></p>
</div></body></html>"""


def test_docbook_navigation_and_toc_go_content_stays() -> None:
    _, body = html_to_markdown(DOCBOOK)
    for nav in ("Prev", "Next", "Home", "Table of Contents", "Installing the server"):
        assert nav not in body
    assert "Install the package" in body
    assert "listen_port" in body
    assert "setup --init" in body


def test_texinfo_nav_panel_goes() -> None:
    _, body = html_to_markdown(TEXINFO)
    assert "Previous" not in body and "Contents" not in body
    assert "2.1 Overview" in body and "every node has a name" in body


def test_toctree_and_permalinks_go_api_links_and_see_also_stay() -> None:
    _, body = html_to_markdown(SPHINX_TOCTREE)
    assert "JSON encoder" not in body  # a table of contents entry
    assert "¶" not in body
    assert "`json.dumps()`" in body  # links that are code belong to the prose
    assert "git-log(1)" in body  # a section's own list of links is content


def _stripped(pages: list[str]) -> list[str]:
    """The pages as one ingest's census strips them."""
    chrome = RepeatedBlocks()
    for page in pages:
        chrome.add(page)
    return [chrome.strip(page) for page in pages]


def test_repeated_blocks_are_kept_once() -> None:
    pages = [
        f"# Page {n}\n\nBody {n} text about topic {n * 7}.\n\n## SYNOPSIS\n\nx {n}\n\n"
        f"© Copyright 2001-2026. Last updated on 2026-10-0{n}.\n\nBuilt with a generator."
        for n in range(1, 6)
    ]
    stripped = _stripped(pages)
    assert "Copyright" in stripped[0]
    assert all("Copyright" not in page for page in stripped[1:])
    assert all("Built with" not in page for page in stripped[1:])  # the whole footer run
    assert all("## SYNOPSIS" in page for page in stripped)  # headings are structure
    assert all(f"Body {n}" in stripped[n - 1] for n in range(1, 6))


def test_a_title_bar_drawn_as_a_table_on_every_page_is_kept_once() -> None:
    # Doxygen's "SDL 2.0" bar opens every page; the same table amid a page is content
    shared = "| Option | Meaning |\n| --- | --- |\n| -v | verbose |"
    pages = [
        f"| SDL 2.0 |\n| --- |\n\n# Page {n}\n\nBody {n} about topic {n * 7}.\n\n{shared}\n\n"
        f"More of page {n}."
        for n in range(1, 6)
    ]
    stripped = _stripped(pages)
    assert "SDL 2.0" in stripped[0]
    assert all("SDL 2.0" not in page for page in stripped[1:])
    assert all("| -v | verbose |" in page for page in stripped)


def test_directory_ingest_strips_repeated_footers_and_the_site_name(tmp_path: Path) -> None:
    for n in range(4):
        (tmp_path / f"p{n}.html").write_text(
            f"<html><head><title>Topic {n} &#8212; Acme 1.0 documentation</title></head>"
            f"<body><h1>Topic {n}</h1><p>Content of page {n} about thing {n}.</p>"
            f"<div id='footer'>Last updated 2024-05-3{n} 00:35:55 UTC</div></body></html>"
        )
    docs = [
        d
        for d in load_paths([tmp_path], include=["*.html"], exclude=[], max_bytes=10**6)
        if isinstance(d, SourceDocument)
    ]
    assert len(docs) == 4
    assert sum("Last updated" in d.text for d in docs) == 1
    assert all(f"Content of page {n}" in docs[n].text for n in range(4))
    assert [d.title for d in docs] == [f"Topic {n}" for n in range(4)]


def _words(text: str) -> list[str]:
    return text.split()


def _plain(text: str) -> str:
    """Without Markdown's emphasis and code marks, escapes and permalink signs."""
    for mark in ("`", "*", "\\", "¶"):
        text = text.replace(mark, "")
    return text


@pytest.mark.parametrize(
    "root", [Path("/usr/share/doc/python3.11/html/library"), Path("/usr/share/doc/git-doc")]
)
def test_retention_of_pre_dt_and_first_cells_on_real_pages(root: Path) -> None:
    """≥ 98 % of the words of <pre>, <dt> and first table cells survive conversion."""
    pages = sorted(root.glob("*.html"))[:60] if root.is_dir() else []
    if not pages:
        pytest.skip(f"{root} is not installed (apt-get install python3.11-doc git-doc)")
    kept = total = 0
    for page in pages:
        html = page.read_text(encoding="utf-8", errors="replace")
        soup = BeautifulSoup(html, "html.parser")
        wanted: list[str] = []
        for tag in soup.find_all(["pre", "dt"]):
            wanted.extend(_words(tag.get_text()))
        for row in soup.find_all("tr"):
            cell = row.find(["td", "th"])
            if cell is not None:
                wanted.extend(_words(cell.get_text()))
        _, body = html_to_markdown(html)
        flat = _plain(body)
        present = set(flat.split())
        for word in wanted:
            total += 1
            bare = _plain(word)
            kept += not bare or bare in present or bare in flat
    assert total > 0
    assert kept / total >= 0.98, (kept, total)


def test_the_site_name_is_left_out_of_page_titles() -> None:
    chrome = RepeatedBlocks()
    titles = [f"Topic {n} — MyProject 2.1 documentation" for n in range(5)]
    titles += ["Index | Other", "git-config(1)", "Setup - Part 2"]
    for title in titles:
        chrome.add("body", title)
    assert chrome.title("Logging HOWTO — MyProject 2.1 documentation") == "Logging HOWTO"
    assert chrome.title("A — B — MyProject 2.1 documentation") == "A — B"
    assert chrome.title("Setup - Part 2") == "Setup - Part 2"  # once: a title, not chrome
    assert chrome.title("git-config(1)") == "git-config(1)"  # no spaced separator
    assert chrome.title("— MyProject 2.1 documentation") == "— MyProject 2.1 documentation"
    prefixed = RepeatedBlocks()
    for n in range(4):
        prefixed.add("body", f"Acme Docs | Page {n}")
    assert prefixed.title("Acme Docs | Installing") == "Installing"
    colon = RepeatedBlocks()  # Doxygen: "Project: Page"; a colon in one title is its own
    for page in ("SDL_audio.h File Reference", "SDL_Rect Struct Reference", "Globals"):
        colon.add("body", f"SDL: {page}")
    colon.add("body", "Chapter 2: Setup")
    assert colon.title("SDL: SDL_video.h Source File") == "SDL_video.h Source File"
    assert colon.title("Chapter 2: Setup") == "Chapter 2: Setup"
    assert colon.title("Note:the ratio 3:2") == "Note:the ratio 3:2"
    bracketed = RepeatedBlocks()
    for n in range(4):
        bracketed.add("body", f"Page {n} (GNU Tool (version 7.3.0))")
    bracketed.add("body", "Sorting (stable)")
    assert bracketed.title("Accumulation (GNU Tool (version 7.3.0))") == "Accumulation"
    assert bracketed.title("Sorting (stable)") == "Sorting (stable)"  # once: part of a title
    assert bracketed.title("git-log(1)") == "git-log(1)"  # not spaced: the name itself


def test_a_block_repeated_mid_page_is_content_and_one_at_the_page_end_is_chrome() -> None:
    def page(n: int) -> str:
        parts = [f"# Page {n}", *(f"Paragraph {n}.{i} of the body." for i in range(16))]
        parts[8:8] = ["Note", "New in version 3.7."]  # admonition title, version line
        return "\n\n".join([*parts, "© Copyright 2001-2026, The Authors."])

    pages = [page(n) for n in range(1, 7)]
    chrome = RepeatedBlocks()
    for text in pages:
        chrome.add(text)
    stripped = [chrome.strip(text) for text in pages]
    assert all("\n\nNote\n\n" in text and "New in version 3.7." in text for text in stripped)
    assert sum("Copyright" in text for text in stripped) == 1


def test_asides_in_the_main_content_stay_unless_they_are_links() -> None:
    _, body = html_to_markdown(
        "<html><body><aside>Site-wide promo banner text</aside>"
        "<div role='main'><h1>Logging HOWTO</h1>"
        "<aside class='topic'><p>Abstract: this page explains how to log.</p></aside>"
        "<p>Use a logger.<a href='#f1'>[1]</a></p>"
        "<aside class='sidebar'><a href='a.html'>First page</a> <a href='b.html'>Second"
        " page</a> <a href='c.html'>Third page</a></aside>"
        "<aside class='footnote'><p>[1] A footnote with its own words.</p></aside>"
        "</div></body></html>"
    )
    assert "Abstract: this page explains how to log." in body
    assert "A footnote with its own words." in body
    assert "promo banner" not in body  # at page level: chrome
    assert "Second page" not in body  # a panel of links: navigation


def test_rules_at_the_ends_of_a_page_go_and_those_inside_stay() -> None:
    _, body = html_to_markdown(
        "<html><body><hr><hr><h1>Sums</h1><p>Add.</p><hr><p>Then carry.</p><hr></body></html>"
    )
    assert body == "# Sums\n\nAdd.\n\n---\n\nThen carry."
    # thousands of rules: still read line by line, once (no pattern that backtracks)
    _, body = html_to_markdown("<html><body>" + "<hr>" * 20_000 + "<p>Text.</p></body></html>")
    assert body == "Text."


def test_a_listing_s_buttons_go_and_its_side_by_side_variants_keep_their_lines() -> None:
    page = (
        "<html><body><main><h1>File system</h1><p>To use the promise-based APIs:</p>"
        '<pre><input type="checkbox" aria-label="Show ES modules">'
        '<code class="language-js mjs"><span>import</span> * as fs from '
        "'node:fs/promises';</code><code class=\"language-js cjs\">const fs = "
        "require('node:fs/promises');</code><button class=\"copy-button\">copy</button></pre>"
        "<pre><code>one();\n</code><code>two();</code></pre>"
        "</main></body></html>"
    )
    _, body = html_to_markdown(page)
    assert (
        "```js\nimport * as fs from 'node:fs/promises';\n"
        "const fs = require('node:fs/promises');\n```"
    ) in body
    assert "```\none();\ntwo();\n```" in body  # a listing that ends its line gains none
    assert "copy" not in body
    grammar = (  # tokens of one line, as Sphinx writes a grammar: they stay on it
        "<html><body><main><h1>Grammar</h1><pre><strong>arg_name</strong> ::= "
        "[<code>identifier</code> | <code>digit</code>+]</pre></main></body></html>"
    )
    assert "arg_name ::= [identifier | digit+]" in html_to_markdown(grammar)[1]


def test_a_list_that_lays_out_sections_gives_headings_not_list_items() -> None:
    # an API reference puts each member's section in a list item; its heading is still
    # the member's heading, so the chunker gives the member's text its subject
    page = (
        "<html><title>Widgets</title><body><h1>Class Widget</h1>"
        "<section class='details'><ul><li><section><h2>Method Details</h2>"
        "<ul class='member-list'><li><section id='spin()'><h3>spin</h3>"
        "<div><code>public void spin(int turns)</code></div><p>Turns the widget.</p>"
        "</section></li><li><section><h3>stop</h3><p>Stops it.</p></section></li>"
        "<li>a stray item</li></ul></section></li></ul></section>"
        "<ul><li>a real list</li><li>of two items</li></ul></body></html>"
    )
    _, body = html_to_markdown(page)
    lines = body.splitlines()
    assert "## Method Details" in lines and "### spin" in lines and "### stop" in lines
    assert "Turns the widget." in lines and "a stray item" in lines
    assert "- a real list" in lines  # a list of text stays a list


def test_a_signature_of_links_right_under_the_last_heading_is_its_content() -> None:
    # the last member of an API page: its signature links its name and parameter types;
    # at the page's end, but its section's own text, not a previous/next or letter bar
    page = (
        "<html><title>Widgets</title><body><h1>Class Widget</h1>"
        "<p>Widgets turn and stop when they are told to, and report what they did.</p>"
        "<section><h3>spin</h3><div class='member-signature'>public static "
        "<a href='#'>Widget</a> <a href='s.html#l1'>spin</a>(<a href='#'>Turns</a> turns)"
        "</div><div>Turns it.</div><dl><dt>Returns:</dt><dd>the widget</dd></dl></section>"
        "<table><tr><th>Jump to:</th><td>"
        + " ".join(f"<a href='#{c}'>{c}</a>" for c in "ABCDEF")
        + "</td></tr></table>"
        "<div><a href='p.html'>Prev</a> <a href='n.html'>Next</a> Widget Spinner</div>"
        "</body></html>"
    )
    _, body = html_to_markdown(page)
    assert "public static Widget spin(Turns turns)" in body
    assert "Prev" not in body and "Jump" not in body  # bars at the end still go


def test_a_title_many_pages_share_gives_way_to_the_page_s_heading_or_file_name(
    tmp_path: Path,
) -> None:
    # a generator titling every source listing "Source code" and every index letter
    # "Index": each page gets a name of its own, the shared title kept after it
    for name in ("Widget", "Spinner", "Gear"):
        (tmp_path / f"{name}.html").write_text(
            f"<html><title>Source code</title><body><pre>class {name} {{ int turns; }}\n"
            f"// {name} turns things over</pre></body></html>"
        )
    for letter in "ABC":
        (tmp_path / f"index-{letter}.html").write_text(
            f"<html><title>Index &#8212; Acme docs</title><body><h1>Index \u2013 {letter}</h1>"
            f"<p>{letter}thing, a word under {letter} that the index lists.</p></body></html>"
        )
    (tmp_path / "guide.html").write_text(
        "<html><title>Guide &#8212; Acme docs</title><body><h1>Guide</h1><p>Read me.</p></body>"
    )
    docs = {
        d.id.rsplit("/", 1)[-1]: d.title
        for d in load_paths([tmp_path], include=["*.html"], exclude=[], max_bytes=10**6)
        if isinstance(d, SourceDocument)
    }
    assert docs["Widget.html"] == "Widget \u2014 Source code"
    assert docs["index-B.html"] == "Index \u2013 B"
    assert docs["guide.html"] == "Guide"


def test_a_listing_s_line_numbers_go_and_numbers_of_the_code_stay() -> None:
    numbered = "".join(
        f"<span class='source-line-no'>{n:03d}</span><span id='line-{n}'>{code}</span>\n"
        for n, code in enumerate(["int a = 504;", "  return a;", "}", "// done"], start=98)
    )
    inline = "".join(f"<span class='linenos'>{n}</span>x{n} = {n * 7}\n" for n in range(1, 5))
    data = "<span>1</span> apple\n<span>3</span> pear\n<span>2</span> fig\n"  # no count
    page = (
        f"<html><body><h1>Listings</h1><pre>{numbered}</pre><pre>{inline}</pre>"
        f"<pre>{data}</pre><pre>1 first\n2 second\n3 third\n</pre></body></html>"
    )
    _, body = html_to_markdown(page)
    assert "\nint a = 504;\n  return a;\n}\n// done\n" in body
    assert "098" not in body and "101" not in body
    assert "\nx1 = 7\nx2 = 14\n" in body
    assert "1 apple\n3 pear\n2 fig" in body  # numbers that do not count up are data
    assert "1 first\n2 second\n3 third" in body  # numbers written in the code itself


def test_a_summary_cell_whose_code_links_its_member_and_types_stays() -> None:
    # an API summary drawn as a grid of divs: the member's cell is code whose name and
    # parameter types link to their pages; the links are the API, not navigation
    rows = "".join(
        f"<div class='col-first'><code>static String</code></div>"
        f"<div class='col-second'><code><a href='#{name}'>{name}</a>(<a href='s.html'>String</a>"
        f" str, <a href='c.html'>CharSequence</a> suffix)</code></div>"
        f"<div class='col-last'><div class='block'>{what}</div></div>"
        for name, what in (("appendIfMissing", "Appends the suffix."), ("trimEnd", "Trims it."))
    )
    page = (
        "<html><title>Strings</title><body><h1>Class Strings</h1>"
        "<p>Operations on strings that are safe when a string is null or empty.</p>"
        f"<h2>Method Summary</h2><div class='summary-table'>{rows}</div>"
        "<p>Every method here returns a new string and leaves its argument alone.</p>"
        "<div><a href='p.html'>Prev Class</a> <a href='n.html'>Next Class</a></div>"
        "</body></html>"
    )
    _, body = html_to_markdown(page)
    assert "appendIfMissing(String str, CharSequence suffix)" in body
    assert "trimEnd(String str, CharSequence suffix)" in body
    assert "Prev Class" not in body  # a bar of plain links still goes


def test_a_declaration_whose_api_names_link_to_their_pages_stays() -> None:
    # Doxygen's member table: no <code>, but the member and its types are links whose
    # texts are API names (the one definition of an identifier); spacer rows are empty
    row = (
        "<tr><td>{kind}</td><td><a class='el' href='#a{n}'>{name}</a> ({args})</td></tr>"
        "<tr><td colspan='2'>&#160;</td></tr>"
    )
    rows = "".join(
        row.format(kind=kind, n=n, name=name, args=args)
        for n, (kind, name, args) in enumerate(
            (
                ("int", "SDL_OpenAudio", "<a href='s.html'>SDL_AudioSpec</a> *desired"),
                ("void", "SDL_PauseAudioDevice", "<a href='d.html'>SDL_AudioDeviceID</a> dev"),
            )
        )
    )
    page = (
        "<html><title>SDL_audio.h</title><body>"
        "<div class='contents'><h1>SDL_audio.h File Reference</h1>"
        f"<table class='memberdecls'><tr><th colspan='2'>Functions</th></tr>{rows}</table>"
        "<h2>Detailed Description</h2><p>Access to the raw audio mixing buffer for the "
        "device, opened once and paused until the program starts it.</p></div>"
        "<div><a href='3.11.2.html'>3.11.2</a> <a href='3.11.1.html'>3.11.1</a></div>"
        "</body></html>"
    )
    _, body = html_to_markdown(page)
    assert "SDL_OpenAudio (SDL_AudioSpec *desired)" in body
    assert "SDL_PauseAudioDevice (SDL_AudioDeviceID dev)" in body
    assert "|  |" not in body and "| \xa0 |" not in body  # no empty spacer rows
    assert "3.11.1" not in body  # a bar of version links is navigation


def test_a_listing_drawn_one_element_per_line_becomes_code_without_its_numbers() -> None:
    # Doxygen's source pages: a <div> of line <div>s, each opening with its number (some
    # numbers are links); code, not paragraphs, and no number glued to its line
    lines = ["}", "/* audio */", "", "extern int SDL_OpenAudio(SDL_AudioSpec *desired);", "}"]
    drawn = "".join(
        "<div class='line'>"
        + (f"<a id='l{n}'></a>" if 1 < n < len(lines) else "")  # equal first and last lines
        + "<span class='lineno'>"
        + (f"<a href='#l{n}'>{n:>4}</a>" if n == 4 else f"{n:>4}")
        + f"</span>{text}</div>"
        for n, text in enumerate(lines, start=1)
    )
    steps = "".join(
        f"<p><b>{n}</b> Step {word} of the setup.</p>" for n, word in enumerate("abc", 1)
    )
    ranked = "".join(f"<tr><td>{n}</td><td>team {n}</td></tr>" for n in range(1, 5))
    page = (
        "<html><title>SDL_audio.h</title><body><h1>SDL_audio.h</h1>"
        f"<div class='fragment'>{drawn}</div>{steps}<table>{ranked}</table></body></html>"
    )
    _, body = html_to_markdown(page)
    listing = "```\n}\n/* audio */\n\nextern int SDL_OpenAudio(SDL_AudioSpec *desired);\n}\n```"
    assert listing in body  # whole, though its last line repeats its first
    assert "4extern" not in body
    assert "**1** Step a of the setup." in body  # numbered paragraphs are steps, not lines
    assert "| 2 | team 2 |" in body  # a ranked table stays a table


def test_a_listing_laid_out_as_a_table_beside_its_line_numbers_becomes_its_code() -> None:
    # Pygments' linenos=table (spans around each number), Hugo's (a <code> inside the
    # <pre>) and gtk-doc's (bare numbers): one row, the numbers' cell and the code's cell
    pygments = (
        "<table class='highlighttable'><tr><td class='linenos'><div><pre>"
        "<span>1</span>\n<span>2</span>\n<span>3</span></pre></div></td>"
        "<td class='code'><div><pre>def f(x):\n    y = x + 1\n    return y\n</pre></div></td>"
        "</tr></table>"
    )
    hugo = (
        "<div class='highlight'><table><tr><td class='lntd'><pre><code>"
        "<span class='lnt'>7\n</span><span class='lnt'>8\n</span></code></pre></td>"
        "<td class='lntd'><pre><code>make build\nmake install\n</code></pre></td>"
        "</tr></table></div>"
    )
    gtkdoc = (
        "<table class='listing_frame'><tbody><tr><td class='listing_lines'><pre>1\n2</pre></td>"
        "<td class='listing_code'><pre class='programlisting'>static void\nbake (Cake *cake);</pre>"
        "</td></tr></tbody></table>"
    )
    ranked = "<table><tr><td><pre>1\n2</pre></td><td>two lines of text</td></tr></table>"
    page = (
        "<html><title>Listings</title><body><h1>Listings</h1>"
        f"<p>First:</p>{pygments}<p>Then:</p>{hugo}<p>Last:</p>{gtkdoc}{ranked}</body></html>"
    )
    _, body = html_to_markdown(page)
    assert "```\ndef f(x):\n    y = x + 1\n    return y\n```" in body, body
    assert "```\nmake build\nmake install\n```" in body, body
    assert "```\nstatic void\nbake (Cake *cake);\n```" in body, body
    listings = body.split("| ")[0]
    assert not re.search(r"^\s*\d+\s*$", listings, re.M), body  # no line number left
    assert "| two lines of text |" in body  # numbers beside text, not code: still a table


def test_a_navigation_table_that_repeats_its_shape_not_its_text_is_kept_once() -> None:
    # DocBook's header names the page and its chapter between "Prev" and "Next"; its
    # footer the pages before and after; the first page has no "Prev", the last no "Next"
    titles = [f"{n}.1. Topic number {n}" for n in range(1, 8)]
    pages = []
    for n, title in enumerate(titles, start=1):
        prev = "Prev" if n > 1 else ""
        after = "Next" if n < len(titles) else ""
        header = f"| {title} | | |\n| --- | --- | --- |\n| {prev} | Chapter {n % 2} | {after} |"
        before = titles[n - 2] if n > 1 else ""
        following = titles[n] if n < len(titles) else ""
        footer = f"| {before} | Home | {following} |\n| --- | --- | --- |"
        table = f"| key{n} | value {n * 3} |\n| --- | --- |\n| mode | {n} |"  # content at the end
        body = f"## {title}\n\nBody of page {n} about x{n}.\n\n{table}"
        pages.append(f"{header}\n\n{body}\n\n{footer}")
    stripped = _stripped(pages)
    assert sum("| Prev |" in page or "| Next |" in page for page in stripped) == 1
    assert sum("| Home |" in page for page in stripped) == 1
    for n, page in enumerate(stripped, start=1):
        assert f"## {titles[n - 1]}" in page and f"Body of page {n}" in page
        assert f"| key{n} | value {n * 3} |" in page  # a table of content keeps its place


def test_an_index_of_api_names_is_navigation_and_its_intro_stays() -> None:
    # a generated API index: each entry links the name and the page that defines it (no
    # <dl> around them, as gtk-doc writes it); most of the page's text is link text
    names = [f"g_file_enumerate_children_op_{n}" for n in range(30)]
    entries = "".join(
        f"<dt><a href='GFile.html#{name}'>{name}</a>, function in <a href='GFile.html'>GFile"
        "</a></dt><dd></dd>"
        for name in names
    )
    page = (
        "<html><title>Index</title><body><div class='index'><h1>Index</h1>"
        "<p>Every symbol of the library.</p><h3>G</h3>"
        f"{entries}</div></body></html>"
    )
    _, body = html_to_markdown(page)
    assert "g_file_enumerate_children_op_7" not in body, body
    assert "Every symbol of the library." in body
    # the same entries amid an API page's prose are its content (names_api)
    prose = " ".join(["The file operations below copy, move and delete files."] * 12)
    _, body = html_to_markdown(page.replace("<h3>G</h3>", f"<p>{prose}</p><h3>G</h3>"))
    assert "g_file_enumerate_children_op_7, function in GFile" in body
