import pytest

from ingest.chunking import chunk_text, sections
from lore.sentences import segments
from lore.tokens import WordPieceCounter, counter_for, packaged_model_dir


@pytest.fixture(scope="module")
def counter() -> WordPieceCounter:
    return counter_for(packaged_model_dir())


DOC = """# Payments runbook

Intro paragraph about the payments-api.

## Symptoms

HTTP 504 from the gateway. Pool waits grow.

```yaml
pool:
  idle_timeout_ms: 3000
# not a heading inside a fence
```

## Mitigation

### Step one

Raise max_connections.
"""


def test_sections_follow_headings_and_keep_fences_whole() -> None:
    got = sections(DOC)
    assert [h for h, _ in got] == [
        "Payments runbook",
        "Payments runbook > Symptoms",
        "Payments runbook > Mitigation > Step one",
    ]
    symptoms = got[1][1]
    assert symptoms[1].startswith("```yaml") and "# not a heading" in symptoms[1]


def test_chunks_carry_heading_path_and_fit_the_model(counter: WordPieceCounter) -> None:
    chunks = chunk_text(DOC, counter, size=200, overlap=32, title="Runbook")
    assert [c.heading for c in chunks][-1] == "Payments runbook > Mitigation > Step one"
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert counter.count(chunk.embed_text("Runbook")) + 2 <= 256


def test_long_text_is_split_with_overlap_and_nothing_lost(counter: WordPieceCounter) -> None:
    sentences = [
        f"Sentence number {i} mentions error_code_{i} and more words here." for i in range(120)
    ]
    chunks = chunk_text(" ".join(sentences), counter, size=64, overlap=16)
    assert len(chunks) > 5
    assert all(c.token_count <= 64 for c in chunks)
    joined = " ".join(c.text for c in chunks)
    assert all(f"error_code_{i} " in joined for i in range(120))
    # consecutive chunks share their boundary sentence (overlap)
    first_tail = chunks[0].text.split(". ")[-1]
    assert first_tail.rstrip(".") in chunks[1].text


def test_one_giant_token_run_is_windowed(counter: WordPieceCounter) -> None:
    blob = " ".join(f"tok{i}" for i in range(3000))
    chunks = chunk_text(blob, counter, size=100, overlap=10)
    assert len(chunks) > 1
    assert all(c.token_count <= 100 for c in chunks)


def test_title_budget_shrinks_chunks_for_long_headings(counter: WordPieceCounter) -> None:
    heading = "# " + "very long heading words " * 30
    text = heading + "\n\n" + "body words here. " * 200
    for chunk in chunk_text(text, counter, size=250, overlap=0, title="T"):
        assert counter.count(chunk.embed_text("T")) + 2 <= 256


def test_longer_fences_and_pathological_headings(counter: WordPieceCounter) -> None:
    text = "# Doc\n\n````md\n```\ninner\n```\n````\n\n## Next\n\nbody"
    assert [h for h, _ in sections(text)] == ["Doc", "Doc > Next"]
    assert sections("# a" + " " * 20_000 + "b #\n\ntext") == [("a" + " " * 20_000 + "b", ["text"])]


def test_a_long_definition_keeps_its_term_in_every_chunk(counter: WordPieceCounter) -> None:
    body = " ".join(f"Sentence {i} explains how the value is read and applied." for i in range(60))
    doc = f"# Options\n\ncore.autocrlf\n:   {body}\n\n    Another paragraph of the same entry.\n"
    chunks = chunk_text(doc, counter, size=64, overlap=8)
    assert len(chunks) > 3
    assert all(c.text.startswith("core.autocrlf") for c in chunks), [c.text[:40] for c in chunks]
    joined = " ".join(c.text for c in chunks)
    assert "Sentence 59" in joined and "Another paragraph" in joined


def test_a_new_term_ends_the_subject(counter: WordPieceCounter) -> None:
    doc = "# O\n\nfirst.key\n:   " + "word " * 300 + "\n\nplain paragraph after.\n\n" + "x " * 200
    chunks = chunk_text(doc, counter, size=64, overlap=0)
    late = [c for c in chunks if "plain paragraph" in c.text or c.text.startswith("x")]
    assert late and not any(c.text.startswith("first.key") for c in late[1:])


def test_overlap_from_one_definition_never_sits_under_the_next_term(
    counter: WordPieceCounter,
) -> None:
    first = " ".join(f"Fact {i} of the first setting." for i in range(12))
    second = " ".join(f"Point {i} of the second setting." for i in range(30))
    doc = f"# Options\n\nfirst.key\n:   {first}\n\nsecond.key\n:   {second}\n"
    chunks = chunk_text(doc, counter, size=64, overlap=24)
    for chunk in chunks:
        lines = chunk.text.splitlines()
        if lines[0] == "second.key":  # what follows the term is the second setting's
            assert "Fact" not in chunk.text, chunk.text
        assert chunk.text.count("second.key") <= 1, chunk.text  # the term once, not twice
    assert any(c.text.startswith("second.key") and "Point 29" in c.text for c in chunks)


def test_a_long_list_is_cut_between_items_and_keeps_one_item_per_line(
    counter: WordPieceCounter,
) -> None:
    items = [f"- item {i} names the setting number {i} and what it does" for i in range(40)]
    chunks = chunk_text("# List\n\n" + "\n".join(items) + "\n", counter, size=64, overlap=8)
    assert len(chunks) > 3
    for chunk in chunks:
        for line in chunk.text.splitlines():
            assert line.count("- item") <= 1, line  # no items run together on a line
    joined = "\n".join(c.text for c in chunks)
    assert all(item in joined for item in items)


def test_a_fence_indented_under_a_definition_stays_code(counter: WordPieceCounter) -> None:
    code = "\n".join(f"    line_{i} = compute({i})" for i in range(40))
    doc = f"# API\n\nrun\n:   Runs the job:\n\n    ```\n{code}\n    ```\n"
    chunks = chunk_text(doc, counter, size=64, overlap=8)
    pieces = [c.text for c in chunks if "line_" in c.text]
    assert len(pieces) > 2
    for piece in pieces:
        assert "```" in piece and all(line.count("line_") <= 1 for line in piece.splitlines())


def test_an_entry_with_several_names_keeps_them_over_its_definition(
    counter: WordPieceCounter,
) -> None:
    before = " ".join(f"Fact {i} of the option before." for i in range(10))
    body = " ".join(f"Point {i} of the three-way merge." for i in range(6))
    doc = f"# Options\n\n--before\n:   {before}\n\n-3\n\n--3way\n\n--no-3way\n:   {body}\n"
    chunks = chunk_text(doc, counter, size=64, overlap=24)
    holding = [c.text for c in chunks if "Point 0" in c.text]
    assert holding and all(t.startswith("-3, --3way, --no-3way") for t in holding), holding


def test_a_definition_opening_with_code_keeps_its_fences_in_order(
    counter: WordPieceCounter,
) -> None:
    code = "\n".join(f"    $ git step {i}" for i in range(3))
    doc = f"# EXAMPLES\n\nStart from a tag\n:   ```\n{code}\n    ```\n\nThen read on.\n"
    [chunk] = chunk_text(doc, counter, size=200, overlap=8)
    assert chunk.text.startswith("Start from a tag\n:   ```")
    assert chunk.text.index("git step 2") < chunk.text.index("    ```") < chunk.text.index("Then")


def test_a_long_quotation_keeps_one_quoted_line_per_line(counter: WordPieceCounter) -> None:
    quote = "\n".join(f"> quoted line {i} says something of its own here" for i in range(40))
    chunks = chunk_text("# Q\n\n" + quote + "\n", counter, size=64, overlap=8)
    assert len(chunks) > 2
    assert all(line.count("> quoted") <= 1 for c in chunks for line in c.text.splitlines())


def test_an_entry_with_too_many_names_to_repeat_carries_its_last(counter: WordPieceCounter) -> None:
    names = [f"object.__operation_number_{i}__(self, other)" for i in range(6)]
    body = " ".join(f"Point {i} of the comparison methods." for i in range(40))
    doc = "# Data model\n\n" + "\n\n".join(names[:-1]) + f"\n\n{names[-1]}\n:   {body}\n"
    chunks = chunk_text(doc, counter, size=64, overlap=8)
    later = [c.text for c in chunks if "Point 3" in c.text or "Point 39" in c.text]
    assert later and all(t.startswith(names[-1]) for t in later[1:]), later


def test_a_definitions_later_paragraph_under_its_repeated_term_reads_as_its_description(
    counter: WordPieceCounter,
) -> None:
    body = " ".join(f"Sentence {i} explains how the value is read and applied." for i in range(9))
    later = "    Another paragraph of the same entry: set it to\n    true on Windows."
    doc = f"# Options\n\ncore.autocrlf\n:   {body}\n\n{later}\n"
    chunks = chunk_text(doc, counter, size=64, overlap=0)
    (last,) = [c for c in chunks if "Another paragraph" in c.text]
    assert last.text.startswith("core.autocrlf\n:   Another paragraph"), last.text
    assert "\n    true on Windows." in last.text  # its next line stays indented under it
    # so the shared splitter reads it as prose under the term, not as indented code
    assert all(s.kind != "code" for s in segments(last.text)), segments(last.text)


def test_a_chunk_without_a_letter_or_digit_joins_its_neighbour_across_sections(
    counter: WordPieceCounter,
) -> None:
    text = (
        "---\n\n# Accumulation\n\nSum the values by their subscripts.\n\n# Rule\n\n* * *"
        "\n\n# Next\n\nThe next section has words of its own."
    )
    drafts = chunk_text(text, counter, size=200, overlap=0)
    assert [d.heading for d in drafts] == ["Accumulation", "Next"]
    assert drafts[0].text.startswith("---") and "subscripts" in drafts[0].text
    assert drafts[0].text.endswith("* * *")
    assert all(any(ch.isalnum() for ch in d.text) for d in drafts)
    assert [d.ordinal for d in drafts] == [0, 1]
