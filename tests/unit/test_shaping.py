import numpy as np
import pytest

from retrieval.shaping import mmr, relative_cutoff


def test_mmr_off_keeps_order_and_on_skips_near_duplicates() -> None:
    vectors = np.asarray([[1, 0], [0.999, 0.01], [0, 1], [0.7, 0.7]], dtype=np.float32)
    scores = [1.0, 0.99, 0.5, 0.4]
    assert mmr(scores, vectors, 0.0, 3) == [0, 1, 2]
    diverse = mmr(scores, vectors, 0.5, 3)
    assert diverse[0] == 0
    assert 1 not in diverse[:2]  # the near-duplicate of the best waits
    assert sorted(mmr(scores, vectors, 0.5, 10)) == [0, 1, 2, 3]


def test_mmr_full_diversity_and_edges() -> None:
    vectors = np.eye(3, dtype=np.float32)
    assert mmr([0.3, 0.2, 0.1], vectors, 1.0, 3) == [0, 1, 2]
    assert mmr([], np.zeros((0, 2), dtype=np.float32), 0.3, 5) == []
    with pytest.raises(ValueError):
        mmr([1.0], vectors[:1], 1.5, 1)


def test_relative_cutoff() -> None:
    scores = [0.0328, 0.0320, 0.0200, 0.0161]
    assert relative_cutoff(scores, None) == 4
    assert relative_cutoff(scores, 0.9) == 2
    assert relative_cutoff(scores, 1.0) == 1
    assert relative_cutoff(scores, 0.1) == 4
    assert relative_cutoff([], 0.5) == 0
    with pytest.raises(ValueError):
        relative_cutoff(scores, 0.0)


def test_the_same_passage_in_another_document_folds_into_the_first() -> None:
    from retrieval.shaping import fold_duplicates

    watch = (
        "Watch for changes on filename, where filename is either a file or a directory; "
        "the listener gets two arguments, the event type and the file name"
    )
    other = "Stop watching for changes on filename; without a listener every one is removed"
    passages = [
        ("fs.html", "File system > fs.watch(filename)", watch),
        ("fs.md", "File system > `fs.watch(filename)`", f"{watch}. See [caveats](#caveats)."),
        ("fs.md", "File system > fs.unwatchFile()", other),
        ("fs.html", "File system > fs.unwatchFile()", other),
        ("fs.html", "File system > fs.watch(filename)", watch),  # same document: kept
        ("os.html", "Operating system > Notes", watch),  # another heading: another answer
        ("a.html", "A > getValue", "Returns the value."),  # too short to fold
        ("b.html", "B > getValue", "Returns the value."),
    ]
    groups = fold_duplicates(passages, limit=10)
    assert groups == [[0, 1], [2, 3], [4], [5], [6], [7]]
    assert fold_duplicates(passages, limit=2) == [[0, 1], [2, 3]]  # the first do not move
