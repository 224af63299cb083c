"""Ingest roots: where a file's document id comes from, whatever the working directory.

A file's id is ``<label>/<path relative to its root>``. The root is the directory given
to ``lore ingest`` (a file given by name: its directory) and the label is that
directory's name unless ``--as LABEL`` chooses one, so ``lore ingest
examples/corpus/production`` stores ``production/alerts/x.md`` from any folder.

A store remembers each label's root (its resolved directory, :data:`META_PREFIX` keys in
the store's meta), which makes three things hold:

* a path inside a known root takes that root's label and ids (the deepest such root):
  ``lore ingest docs/sub`` after ``lore ingest docs`` re-ingests ``docs/sub/…``, it does
  not store the same files again as ``sub/…``;
* a label is one root's: another directory with the same name is refused with both
  roots named and ``--as`` suggested, before anything is loaded or written — unless the
  label's directory no longer exists (a moved folder: the label follows it, logged);
* an id maps back to its file (``--prune``, ``lore status --forget-missing``, a path
  typed to ``lore delete``).

Labels are non-empty, do not start or end with ``/``, hold no ``..``, ``.`` or empty
segment, no ``#`` and no control character; a label that is a path prefix of another
(``docs`` and ``docs/old``) is refused too, or an id could be read two ways.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from lore.errors import InvalidRequestError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from lore.store_roles import StoreSettings

META_PREFIX = "root:"
"""Store meta key of a label's root: ``root:<label>`` → the resolved directory."""
MAX_LABEL = 200


def check_label(label: str) -> str:
    """``label`` when it can prefix ids; an ``InvalidRequestError`` saying why not."""
    if not label or not label.strip():
        raise InvalidRequestError("a root label (--as) must not be empty")
    if len(label) > MAX_LABEL:
        raise InvalidRequestError(f"root label {label[:40]!r}… is over {MAX_LABEL} characters")
    if label.startswith("/") or label.endswith("/"):
        raise InvalidRequestError(f"root label {label!r} must not start or end with '/'")
    if any(part in ("", ".", "..") for part in label.split("/")):
        raise InvalidRequestError(f"root label {label!r} must not hold '..', '.' or '//'")
    if "#" in label or any(ord(ch) < 32 or ord(ch) == 127 for ch in label):
        raise InvalidRequestError(f"root label {label!r} must not hold '#' or control characters")
    return label


def directory_of(path: Path) -> Path:
    """The resolved directory ``path`` names, or for a file (or nothing) the one holding it."""
    if path.is_dir():
        return path.resolve()
    return path.absolute().parent.resolve()


def default_label(directory: Path) -> str:
    """A resolved directory's name as a label; ``/`` has none and needs ``--as``."""
    if not directory.name:
        raise InvalidRequestError(
            f"{directory} has no name to label its documents with: choose one with --as LABEL"
        )
    try:
        return check_label(directory.name)
    except InvalidRequestError as exc:
        raise InvalidRequestError(f"{exc} (the name of {directory}): choose one with --as") from exc


@dataclass(frozen=True, slots=True)
class Root:
    """A label and the resolved directory its ids are relative to."""

    label: str
    path: Path


@dataclass(frozen=True, slots=True)
class Target:
    """One path given to ingest and the root its files take their ids from."""

    path: Path
    root: Root
    offset: PurePosixPath
    """The given directory (a file's directory) relative to the root; ``.`` at the root."""
    nested: tuple[tuple[PurePosixPath, str], ...] = ()
    """Known roots inside the given directory (relative to it), deepest first: their
    files keep the ids they were stored with."""

    def relative(self, file: Path) -> PurePosixPath:
        """``file`` (the path given, or one found under it) relative to the given directory."""
        base = self.path if self.path.is_dir() else self.path.parent
        try:
            return PurePosixPath(file.relative_to(base).as_posix())
        except ValueError:
            return PurePosixPath(file.name)

    def place(self, file: Path) -> tuple[str, PurePosixPath]:
        """The label and root-relative path of ``file``: its id is ``label/path``."""
        inside = self.relative(file)
        for offset, label in self.nested:
            if offset in inside.parents:
                return label, inside.relative_to(offset)
        return self.root.label, self.offset / inside

    def id_of(self, file: Path) -> str:
        """The document id of ``file``: ``<label>/<path relative to its root>``."""
        label, relative = self.place(file)
        return f"{label}/{relative.as_posix()}"

    @property
    def prefix(self) -> str:
        """The id of the file given, or for a directory the id prefix (ending in ``/``)."""
        if not self.path.is_dir():
            return self.id_of(self.path)
        if self.offset == PurePosixPath("."):
            return f"{self.root.label}/"
        return f"{self.root.label}/{self.offset.as_posix()}/"


def plain_target(path: Path, label: str | None = None) -> Target:
    """A path as its own root (no store to consult): its directory, named or ``label``."""
    directory = directory_of(path)
    root = Root(check_label(label) if label else default_label(directory), directory)
    return Target(path, root, PurePosixPath("."))


def _inside(directory: Path, root: Path) -> PurePosixPath | None:
    try:
        return PurePosixPath(directory.relative_to(root).as_posix())
    except ValueError:
        return None


def plan_targets(
    paths: Sequence[Path], label: str | None, known: Mapping[str, Path]
) -> tuple[list[Target], dict[str, Path]]:
    """The targets of ``paths`` and the roots they add to ``known`` (label → directory).

    Without ``label`` a path inside a known root takes the deepest such root; otherwise
    its directory becomes a new root named after it. With ``label`` the path must lie in
    that label's root, or the label is new and the path in no known root (its files
    would be stored twice). A label already another directory's, or
    overlapping another label, is an ``InvalidRequestError`` naming both roots; nothing
    is recorded by this function (the caller records the new roots it returns).
    """
    chosen = check_label(label) if label is not None else None
    roots = dict(known)
    added: dict[str, Path] = {}
    targets: list[Target] = []
    for path in paths:
        directory = directory_of(path)
        if chosen is not None:
            candidates = [(chosen, roots[chosen])] if chosen in roots else []
        else:
            candidates = [(lab, root) for lab, root in roots.items() if _inside(directory, root)]
        inner = max(candidates, key=lambda c: len(c[1].parts), default=None)
        if inner is not None and (offset := _inside(directory, inner[1])) is not None:
            targets.append(Target(path, Root(inner[0], inner[1]), offset))
            continue
        new = chosen if chosen is not None else default_label(directory)
        if not path.exists():  # recorded as failed, under its directory's name: no new root
            targets.append(Target(path, Root(new, directory), PurePosixPath(".")))
            continue
        if new in roots and roots[new].exists():
            raise collision(path, new, roots[new], directory)
        held = [(lab, root) for lab, root in roots.items() if _inside(directory, root)]
        if chosen is not None and held:
            label_held, root = max(held, key=lambda c: len(c[1].parts))
            raise InvalidRequestError(
                f"cannot ingest {path} as {chosen!r}: it lies in the root {root}, whose "
                f"files are stored as `{label_held}/…`; ingest it without --as to update them"
            )
        overlapping = overlap(new, roots)
        if overlapping is not None:
            raise InvalidRequestError(
                f"root label {new!r} (for {directory}) overlaps the label {overlapping!r} "
                f"(root {roots[overlapping]}): ids under one would read as the other's; "
                "choose another label with --as LABEL"
            )
        roots[new] = added[new] = directory
        targets.append(Target(path, Root(new, directory), PurePosixPath(".")))
    return [_with_nested(t, roots) for t in targets], added


def _with_nested(target: Target, roots: Mapping[str, Path]) -> Target:
    """``target`` knowing the other roots that lie inside its directory."""
    if not target.path.is_dir():
        return target
    directory = target.root.path / target.offset
    nested = [
        (offset, label)
        for label, root in roots.items()
        if label != target.root.label
        and (offset := _inside(root, directory)) is not None
        and offset != PurePosixPath(".")
    ]
    nested.sort(key=lambda n: len(n[0].parts), reverse=True)
    return Target(target.path, target.root, target.offset, tuple(nested))


def collision(path: Path, label: str, existing: Path, directory: Path) -> InvalidRequestError:
    """The error for a label that is already another directory's root."""
    return InvalidRequestError(
        f"cannot ingest {path}: its documents would be labelled {label!r}, but {label!r} is "
        f"already the root {existing} and this is {directory}; their ids would collide "
        f"(`{label}/…`). Give this root its own label: lore ingest {path} --as OTHER-LABEL"
    )


def overlap(label: str, labels: Iterable[str]) -> str | None:
    """A known label that is a path prefix of ``label`` or has it as one (else None)."""
    for other in labels:
        if other != label and (label.startswith(other + "/") or other.startswith(label + "/")):
            return other
    return None


def file_of(file_id: str, roots: Mapping[str, Path]) -> Path | None:
    """The file a file's id (or a JSON Lines record's source, minus ``#id``) names."""
    label = owner(file_id, roots)
    if label is None:
        return None
    return roots[label] / file_id[len(label) + 1 :]


def owner(file_id: str, labels: Iterable[str]) -> str | None:
    """The label ``file_id`` starts with (``<label>/…``), or None."""
    found = [lab for lab in labels if file_id.startswith(lab + "/")]
    return max(found, key=len, default=None)


def locate(path: Path, roots: Mapping[str, Path]) -> str | None:
    """The id a path on disk has in a store with these roots (the deepest one holding it)."""
    directory = directory_of(path)
    inside = [(lab, off) for lab, root in roots.items() if (off := _inside(directory, root))]
    if not inside:
        return None
    label, offset = max(inside, key=lambda c: len(c[1].parts))
    tail = offset if path.is_dir() else offset / path.name
    return label if tail == PurePosixPath(".") else f"{label}/{tail.as_posix()}"


def known_roots(store: StoreSettings) -> dict[str, Path]:
    """The roots a store's documents were ingested from, by label."""
    found = store.meta_with_prefix(META_PREFIX)
    return {key[len(META_PREFIX) :]: Path(value) for key, value in found.items()}


def record_roots(store: StoreSettings, added: Mapping[str, Path]) -> None:
    """Record new roots; a label another ingest just gave another directory is refused."""
    for label, directory in added.items():
        held = Path(store.claim_meta(META_PREFIX + label, str(directory)))
        if held == directory:
            continue
        if held.exists():
            raise collision(directory, label, held, directory)
        log.warning("root %r moved: %s is gone, its ids now name %s", label, held, directory)
        store.set_meta(META_PREFIX + label, str(directory))
