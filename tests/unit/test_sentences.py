"""The shared sentence splitter on hard-wrapped Markdown, lists, tables, code and fields."""

from lore.sentences import blocks, cut_points, is_whole, segments, sentences, whole_sentences

WRAPPED = """# etcdMembersDown

## Meaning

This alert fires when one or more etcd members are down in a 3-member
cluster, it means quorum is at risk. However, when more members are down, the
cluster becomes unavailable, e.g. writes fail. Albert S. Rogell wrote it.

Severity: critical
**Impact:** writes are rejected.

- Check the member logs, which
  wrap onto a second line.
- Restart the member.

| Alert | Severity |
|---|---|
| Foo | warning |

```shell
kubectl get pods. Not a sentence
```
"""


def test_soft_wrapped_lines_join_and_sentences_end_at_stops_only() -> None:
    said = sentences(WRAPPED)
    assert (
        "This alert fires when one or more etcd members are down in a 3-member cluster, "
        "it means quorum is at risk." in said
    )
    assert (
        "However, when more members are down, the cluster becomes unavailable, e.g. writes fail."
        in said
    )
    assert "Albert S. Rogell wrote it." in said  # an initial is not a sentence end
    assert not any(s.endswith(" it") or s.startswith("cluster,") for s in said)


def test_blocks_keep_lists_tables_fields_headings_and_code_apart() -> None:
    kinds = [(s.kind, s.text) for s in segments(WRAPPED)]
    assert ("heading", "etcdMembersDown") in kinds
    assert ("field", "Severity") in kinds and ("field", "Impact") in kinds
    assert ("item", "Check the member logs, which wrap onto a second line.") in kinds
    assert ("table", "Alert | Severity") in kinds and ("table", "Foo | warning") in kinds
    assert ("code", "kubectl get pods. Not a sentence") in kinds
    assert not any("---" in text for _, text in kinds)  # the table rule is layout


def test_a_short_title_line_over_its_description_stays_apart() -> None:
    text = (
        "Mimir ingester TSDB checkpoint creation failed\n"
        "Mimir ingester {{ $labels.instance }} is failing to create TSDB checkpoints now.\n"
    )
    assert [b.text for b in blocks(text)] == [
        "Mimir ingester TSDB checkpoint creation failed",
        "Mimir ingester {{ $labels.instance }} is failing to create TSDB checkpoints now.",
    ]


def test_whole_sentences_drop_fragments_of_a_cut_chunk() -> None:
    cut = "members are down, the cluster. The quorum is lost when two members fail. And then"
    assert whole_sentences(cut) == ["The quorum is lost when two members fail."]
    assert is_whole("Restart the member.") and not is_whole("restart the member.")
    assert not is_whole("Restart the member")


def test_cut_points_keep_line_structure_of_lists_and_split_prose() -> None:
    assert cut_points("- one\n- two") == ["- one", "- two"]
    assert cut_points("First one is\nwrapped. Second one.") == [
        "First one is wrapped.",
        "Second one.",
    ]


def test_paragraphs_indented_under_a_definition_or_item_go_on_with_it_not_as_code() -> None:
    # a converted definition list (``<dd>`` with several paragraphs and a ``<pre>``): its
    # later paragraphs are indented to the description's column, as CommonMark reads them
    text = (
        "HEAD\n"
        ":   names the commit on which you based the changes.\n"
        "\n"
        "    There are a few special-purpose refs that do not begin with `refs/`.\n"
        "\n"
        "    ```\n"
        "      staged     unstaged path\n"
        "    ```\n"
        "\n"
        "        four more columns: indented code\n"
        "\n"
        "Plain paragraph.\n"
        "\n"
        "    indented code at the top\n"
        "- item one\n"
        "\n"
        "  A second paragraph of item one.\n"
        "\n"
        "      code in the item\n"
    )
    kinds = [(s.kind, s.text) for s in segments(text)]
    assert (
        "prose",
        "There are a few special-purpose refs that do not begin with `refs/`.",
    ) in kinds
    assert ("code", "  staged     unstaged path") in kinds  # the indented fence is a fence
    assert ("code", "four more columns: indented code") in kinds
    assert ("code", "indented code at the top") in kinds  # no container: code, as before
    assert ("prose", "A second paragraph of item one.") in kinds
    assert ("code", "code in the item") in kinds
    assert ("prose", "Plain paragraph.") in kinds
    code = [t for k, t in kinds if k == "code"]
    assert not any("special-purpose" in t or "second paragraph" in t for t in code)


def test_a_description_that_opens_with_a_fence_is_code() -> None:
    text = "git-status(1)\n:   ```\n    git status --short\n    ```\n\n    It shows the state.\n"
    kinds = [(s.kind, s.text) for s in segments(text)]
    assert ("code", "git status --short") in kinds
    assert ("prose", "It shows the state.") in kinds
