"""A Markdown body loses what its rendering hides, and nothing a reader sees."""

from pathlib import Path

from ingest.loaders import load_paths
from ingest.markdown import rendered_markdown
from lore.models import SourceDocument

PAGE = """<!--introduced_in=v0.10.0-->
# Addons

<!-- type=misc -->

The [environment
variables that configure it][env] are read; use [`require()`][require],
[`Buffer.from(string[, encoding])`][`Buffer.from(string)`],
[Node-API][] and [Worker] here; see [the guide](n-api.md), [no such label][nolabel], a
footnote[^1] and a task [ ] list. Inline `<!-- not a comment -->` and `[a][b]` stay.
<a id="ERR_X"></a>
### `ERR_X`
<!-- YAML
changes:
  - version: v14.8.0
-->
The callback runs once.

```html
<!-- an example's comment -->
[example]: http://example.com
```

    [indented]: http://example.com/code

[^1]: A footnote is content.

[require]: modules.md#require
[`Buffer.from(string)`]: #bufferfrom
[Node-API]: n-api.md "Node-API"
[worker]: <worker_threads.md>
[env]: #environment-variables
"""


def test_comments_definitions_and_anchors_go_and_reference_links_keep_their_text() -> None:
    shown = rendered_markdown(PAGE)
    assert "<!--introduced_in" not in shown and "YAML" not in shown and "v14.8.0" not in shown
    assert "type=misc" not in shown and '<a id="ERR_X">' not in shown
    assert "modules.md#require" not in shown and "#bufferfrom" not in shown
    assert "The environment\nvariables that configure it are read; use `require()`,\n" in shown
    assert "`Buffer.from(string[, encoding])`,\nNode-API and Worker here" in shown
    assert "[the guide](n-api.md)" in shown  # an inline link is left as written
    assert "[no such label][nolabel]" in shown and "footnote[^1]" in shown and "[ ]" in shown
    assert "Inline `<!-- not a comment -->` and `[a][b]` stay." in shown
    assert "### `ERR_X`" in shown and "The callback runs once." in shown
    # code is byte for byte; a footnote definition is content
    assert "```html\n<!-- an example's comment -->\n[example]: http://example.com\n```" in shown
    assert "    [indented]: http://example.com/code" in shown
    assert "[^1]: A footnote is content." in shown
    assert "\n\n\n" not in shown and shown.startswith("# Addons")


def test_a_definition_inside_a_paragraph_is_text_and_an_unclosed_comment_stays() -> None:
    assert rendered_markdown("Para line\n[a]: http://x\nmore") == "Para line\n[a]: http://x\nmore"
    assert rendered_markdown("[Note]: read this first.\n") == "[Note]: read this first.\n"
    assert rendered_markdown("Text <!-- open\n\nnever closed") == "Text <!-- open\n\nnever closed"
    plain = "# Title\n\nNothing hidden here, [a link](x.md).\n"
    assert rendered_markdown(plain) == plain


def test_a_loaded_markdown_file_is_indexed_as_rendered(tmp_path: Path) -> None:
    (tmp_path / "addons.md").write_text(PAGE, encoding="utf-8")
    (document,) = list(
        load_paths([tmp_path / "addons.md"], include=["*"], exclude=[], max_bytes=10**6)
    )
    assert isinstance(document, SourceDocument)
    assert document.title == "Addons"
    assert "modules.md#require" not in document.text and "YAML" not in document.text
    assert "use `require()`" in document.text
