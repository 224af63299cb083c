"""Loaders: files and directories in; documents, rejections or skips out.

Supported: Markdown (YAML ``---`` or TOML ``+++`` front matter becomes metadata, see
``ingest.front_matter``), plain text, HTML (converted to Markdown, see ``ingest.html``)
and JSON Lines (one record per line: ``id`` or ``_id``, ``text``, optional ``title`` and
``metadata`` object; every other top-level scalar field becomes metadata too).
Directories are walked recursively with include/exclude globs. Anything unreadable is
returned as ``Rejected`` with a reason; a file of front matter and no body (a Hugo or
MkDocs ``_index.md``) is ``Skipped`` with the reason; loading never stops the batch.

Every document loaded from a file on disk (not an upload, which has no tree to be
relative to) carries path metadata relative to the ingest root
(the directory given, or the file's own directory for a file given by name): ``path``
(``alerts/etcd/high-latency.md``), ``dir`` (``alerts/etcd``, ``.`` at the root) and
``ext`` (``md``). A document's own keys (front matter, JSON fields) win over these, and
metadata given for the run (``--meta k=v``) wins over both.

Document ids: a file's path relative to the working directory (absolute when outside
it); a JSON Lines record's own id.
"""

from __future__ import annotations

import fnmatch
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ingest.front_matter import FrontMatterError
from ingest.front_matter import split_front_matter as _split_front_matter
from ingest.html import html_to_markdown
from lore import jsonsafe
from lore.errors import InvalidRequestError
from lore.metadata import Metadata, normalize_metadata
from lore.models import Rejected, Skipped, SourceDocument, document_problem, printable

SUPPORTED = (".md", ".markdown", ".txt", ".text", ".html", ".htm", ".jsonl")
_MD_TITLE = re.compile(r"^#[ \t]+([^\r\n]*)", re.MULTILINE)
_SNIFF_BYTES = 8192
_RESERVED_JSONL = {"id", "_id", "text", "title", "metadata"}

LoadResult = SourceDocument | Rejected | Skipped


def load_paths(
    paths: Sequence[Path],
    *,
    include: Sequence[str],
    exclude: Sequence[str],
    max_bytes: int,
    extra_metadata: Mapping[str, Any] | None = None,
) -> Iterator[LoadResult]:
    """Yield a document or a rejection for every file under ``paths``, in sorted order."""
    extra = normalize_metadata(extra_metadata)
    for path in paths:
        if path.is_dir():
            for file in _walk(path, include, exclude):
                yield from load_file(file, max_bytes=max_bytes, extra_metadata=extra, root=path)
        elif path.is_file():
            yield from load_file(path, max_bytes=max_bytes, extra_metadata=extra)
        else:
            yield Rejected(document_id_for(path), str(path), "no such file or directory")


def _walk(root: Path, include: Sequence[str], exclude: Sequence[str]) -> Iterator[Path]:
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = file.relative_to(root).as_posix()
        if any(fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(file.name, pat) for pat in exclude):
            continue
        if any(fnmatch.fnmatch(file.name, pat) or fnmatch.fnmatch(rel, pat) for pat in include):
            yield file


def document_id_for(path: Path) -> str:
    """The id a file gets when ingested from the current working directory."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def path_metadata(relative: PurePosixPath) -> dict[str, str]:
    """``path``, ``dir`` and ``ext`` metadata of a file at ``relative`` to the ingest root."""
    parent = relative.parent.as_posix()
    return {
        "path": relative.as_posix(),
        "dir": parent or ".",
        "ext": relative.suffix.lower().lstrip("."),
    }


def load_file(
    path: Path,
    *,
    max_bytes: int,
    extra_metadata: Metadata | None = None,
    root: Path | None = None,
) -> Iterator[LoadResult]:
    """Load one file (a JSON Lines file may yield many documents).

    ``root`` is the directory the path metadata is relative to (default: the file's own).
    """
    doc_id = document_id_for(path)
    try:
        relative = PurePosixPath(path.relative_to(root).as_posix()) if root else None
    except ValueError:
        relative = None
    file_meta = path_metadata(relative or PurePosixPath(path.name))
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED:
        yield Rejected(
            doc_id,
            doc_id,
            f"unsupported file type {suffix or '(none)'!r}; supported: {', '.join(SUPPORTED)}",
        )
        return
    if suffix == ".jsonl":  # limits apply per record; the file is streamed
        yield from _jsonl(path, doc_id, extra_metadata or {}, max_bytes, file_meta)
        return
    try:
        size = path.stat().st_size
        if size > max_bytes:
            yield Rejected(doc_id, doc_id, over_limit("file", size, max_bytes))
            return
        raw = path.read_bytes()
    except OSError as exc:
        yield Rejected(doc_id, doc_id, f"cannot read file: {exc.strerror or exc}")
        return
    yield from_bytes(raw, suffix, path.stem, doc_id, doc_id, extra_metadata, file_meta)


def load_upload(
    name: str,
    raw: bytes,
    *,
    doc_id: str,
    max_bytes: int,
    extra_metadata: Metadata | None = None,
) -> Iterator[LoadResult]:
    """Load an uploaded file's bytes as if it were a file called ``name``."""
    suffix = Path(name).suffix.lower()
    source = f"upload:{name}"
    if suffix not in SUPPORTED:
        yield Rejected(
            doc_id,
            source,
            f"unsupported file type {suffix or '(none)'!r}; supported: {', '.join(SUPPORTED)}",
        )
    elif suffix == ".jsonl":
        with tempfile.TemporaryDirectory() as tmp:
            staged = Path(tmp) / "upload.jsonl"
            staged.write_bytes(raw)
            yield from _jsonl(staged, doc_id, extra_metadata or {}, max_bytes, {})
    elif len(raw) > max_bytes:
        yield Rejected(doc_id, source, over_limit("upload", len(raw), max_bytes))
    else:
        yield from_bytes(raw, suffix, Path(name).stem, doc_id, source, extra_metadata)


def from_bytes(
    raw: bytes,
    suffix: str,
    stem: str,
    doc_id: str,
    source: str,
    extra_metadata: Metadata | None = None,
    file_metadata: Mapping[str, Any] | None = None,
) -> LoadResult:
    """One document from a file's bytes, read by its type (suffix)."""
    try:
        text = decode_text(raw)
    except InvalidRequestError as exc:
        return Rejected(doc_id, source, str(exc))
    extra = extra_metadata or {}
    meta: dict[str, Any] = {}
    if suffix in (".html", ".htm"):
        title, body = html_to_markdown(text)
    elif suffix in (".md", ".markdown"):
        try:
            meta, body, had_front_matter = _split_front_matter(text)
        except FrontMatterError as exc:
            return Rejected(doc_id, source, str(exc))
        if had_front_matter and not body.strip():
            return Skipped(doc_id, source, "front matter only, no body to index")
        found = _MD_TITLE.search(body)
        title = str(meta.pop("title", "") or "") or (found.group(1).strip(" \t#") if found else "")
        title = title or stem
    else:
        title, body, meta = stem, text, {}
    return make_document(doc_id, source, body, title, {**(file_metadata or {}), **meta, **extra})


def over_limit(what: str, size: int, max_bytes: int) -> str:
    """The one size rule's message, for files, uploads, JSON Lines records and JSON texts."""
    return (
        f"{what} is {size:,} bytes, over the {max_bytes:,}-byte limit (ingest.max_document_bytes)"
    )


def make_document(
    doc_id: str,
    source: str,
    text: str,
    title: str,
    metadata: Mapping[str, Any],
    *,
    max_bytes: int | None = None,
) -> LoadResult:
    """Validate one document's parts; bad ones become a rejection with the reason.

    Empty, NUL-bearing or oversized text (``max_bytes``, for texts that arrive as JSON
    strings; files are measured before decoding) and bad metadata are refused.
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if max_bytes is not None and size > max_bytes:
        return Rejected(printable(doc_id), printable(source), over_limit("text", size, max_bytes))
    if "\x00" in text:
        return Rejected(
            printable(doc_id),
            printable(source),
            "text contains NUL characters; only text is stored",
        )
    if not text.strip():
        return Rejected(
            printable(doc_id), printable(source), "document is empty (no text after loading)"
        )
    try:
        meta = normalize_metadata(metadata)
    except InvalidRequestError as exc:
        return Rejected(printable(doc_id), printable(source), f"bad metadata: {exc}")
    problem = document_problem(doc_id, text, title, meta)
    if problem is not None:
        return Rejected(printable(doc_id), printable(source), problem)
    return SourceDocument(id=doc_id, source=source, text=text, title=title.strip(), metadata=meta)


def decode_text(raw: bytes) -> str:
    """Decode UTF-8 (with or without BOM); binary or undecodable input is an error."""
    if not raw.strip():
        raise InvalidRequestError("document is empty (0 bytes of text)")
    if b"\x00" in raw[:_SNIFF_BYTES]:
        raise InvalidRequestError("binary file (contains NUL bytes); only text formats are read")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidRequestError(
            f"not UTF-8 text (invalid byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split front matter (YAML or TOML, flattened to metadata) from a Markdown body."""
    meta, body, _ = _split_front_matter(text)
    return meta, body


def _jsonl(
    path: Path, path_id: str, extra: Metadata, max_bytes: int, file_meta: Mapping[str, Any]
) -> Iterator[LoadResult]:
    seen: set[str] = set()
    try:
        handle = path.open("rb")
    except OSError as exc:
        yield Rejected(path_id, path_id, f"cannot read file: {exc.strerror or exc}")
        return
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if raw.strip():
                yield _jsonl_record(raw, lineno, path_id, extra, max_bytes, seen, file_meta)


def _jsonl_record(
    raw: bytes,
    lineno: int,
    path_id: str,
    extra: Metadata,
    max_bytes: int,
    seen: set[str],
    file_meta: Mapping[str, Any],
) -> LoadResult:
    where = f"{path_id}:{lineno}"
    if len(raw) > max_bytes:
        return Rejected(where, where, over_limit(f"line {lineno}", len(raw), max_bytes))
    try:
        record = jsonsafe.loads(raw, what=f"line {lineno}")
    except InvalidRequestError as exc:
        return Rejected(where, where, str(exc))
    if not isinstance(record, dict):
        return Rejected(where, where, f"line {lineno} is not a JSON object")
    rid = record.get("id", record.get("_id"))
    if not isinstance(rid, str | int) or isinstance(rid, bool) or str(rid).strip() == "":
        return Rejected(where, where, f"line {lineno} has no usable 'id' or '_id'")
    rid = str(rid)
    source = f"{path_id}#{rid}"
    body, title = record.get("text"), record.get("title", "")
    if not isinstance(body, str):
        return Rejected(rid, source, f"line {lineno}: 'text' must be a string")
    if rid in seen:
        return Rejected(where, where, f"line {lineno}: duplicate id {rid!r} in this file")
    seen.add(rid)
    nested = record.get("metadata", {})
    if not isinstance(nested, dict):
        return Rejected(rid, source, f"line {lineno}: 'metadata' must be an object")
    scalars = {
        k: v
        for k, v in record.items()
        if k not in _RESERVED_JSONL and isinstance(v, str | int | float | bool)
    }
    return make_document(
        rid, source, body, str(title or ""), {**file_meta, **scalars, **nested, **extra}
    )
