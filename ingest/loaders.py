"""Loaders: files and directories in; documents, rejections or skips out.

Supported: Markdown (YAML ``---`` or TOML ``+++`` front matter becomes metadata, see
``ingest.front_matter``; what its rendering hides — comments, link reference
definitions — is left out, see ``ingest.markdown``), plain text, HTML (converted to
Markdown, see ``ingest.html``) and JSON Lines (one record per line: ``id`` or ``_id``,
``text``, optional ``title`` and ``metadata`` object; every other top-level scalar field
becomes metadata too).
Directories are walked recursively with include/exclude globs. Anything unreadable is
returned as ``Rejected`` with a reason; a file of front matter and no body (a Hugo or
MkDocs ``_index.md``) is ``Skipped`` with the reason, and so is an HTML page whose main
content is headings alone, or nothing, once its navigation and repeated blocks are left
out (a generated index or table of contents), and a redirect stub (a page that sends its reader
elsewhere at once by a meta refresh and has few words of its own); loading never stops
the batch.
The HTML pages of a directory are first read once for their repeated blocks (footers,
licence lines: ``ingest.boilerplate``), which are then left out of every page but the
first that holds them; the pages read then are converted only once.

Every document loaded from a file on disk (not an upload, which has no tree to be
relative to) carries path metadata relative to its ingest root (``ingest.roots``: the
directory given, or the file's own directory for a file given by name): ``path``
(``alerts/etcd/high-latency.md``), ``dir`` (``alerts/etcd``, ``.`` at the root) and
``ext`` (``md``). A document's own keys (front matter, JSON fields) win over these, and
metadata given for the run (``--meta k=v``) wins over both.

Document ids: a file's ``<root label>/<path relative to the root>``
(``production/alerts/etcd/high-latency.md``), the same from any working directory; a
JSON Lines record's own id, its source ``<file's id>#<record id>``.
"""

from __future__ import annotations

import fnmatch
import gzip
import io
import re
import tempfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ingest.boilerplate import RepeatedBlocks
from ingest.front_matter import FrontMatterError
from ingest.front_matter import split_front_matter as _split_front_matter
from ingest.html import html_to_markdown, redirect_target
from ingest.markdown import rendered_markdown
from ingest.roots import Target, plain_target
from lore import jsonsafe
from lore.errors import InvalidRequestError
from lore.metadata import Metadata, normalize_metadata
from lore.models import Rejected, Skipped, SourceDocument, document_problem, printable

SUPPORTED = (".md", ".markdown", ".txt", ".text", ".html", ".htm", ".jsonl")
COMPRESSED = ".gz"
"""A supported file compressed with gzip (``fs.md.gz``: Debian ships its docs so) is read
as its inner type; JSON Lines is streamed, so not compressed."""
_MD_TITLE = re.compile(r"^#[ \t]+([^\r\n]*)", re.MULTILINE)
_ANY_HEADING = re.compile(r"^#{1,6}[ \t]+([^\r\n]*)", re.MULTILINE)
_SNIFF_BYTES = 8192
BINARY_NUL_SHARE = 1 / 1000
"""NUL bytes per byte, in the first ``_SNIFF_BYTES`` or in the whole file, that make it binary.

Binary formats and UTF-16 text are full of NULs (UTF-16 has one in every other byte of
ASCII); a text page may hold a stray one, as a documented ``'\\0'`` constant does in an
API reference. That page is text: its NUL is shown as U+FFFD.
"""
_RESERVED_JSONL = {"id", "_id", "text", "title", "metadata"}
_HTML = (".html", ".htm")
_HEADING = re.compile(r"\s{0,3}#{1,6}(?:\s|$)")
REDIRECT_MAX_WORDS = 50  # a redirect stub's own words ("Redirecting…"); more is a page
CENSUS_PAGES = 400
"""HTML pages of one directory read for repeated blocks (evenly spread over the tree)."""

LoadResult = SourceDocument | Rejected | Skipped


def load_paths(
    paths: Sequence[Path | Target],
    *,
    include: Sequence[str],
    exclude: Sequence[str],
    max_bytes: int,
    extra_metadata: Mapping[str, Any] | None = None,
) -> Iterator[LoadResult]:
    """Yield a document or a rejection for every file under ``paths``, in sorted order.

    A plain path is its own root, labelled with its directory's name
    (:func:`ingest.roots.plain_target`); a store's roots come as targets
    (``app.steps.load_documents`` plans them).
    """
    extra = normalize_metadata(extra_metadata)
    for given in paths:
        target = given if isinstance(given, Target) else plain_target(given)
        path = target.path
        if path.is_dir():
            files = list(_walk(path, include, exclude))
            chrome, converted = _census(files, max_bytes)
            for file in files:
                yield from load_file(
                    file,
                    max_bytes=max_bytes,
                    extra_metadata=extra,
                    target=target,
                    chrome=chrome,
                    converted=converted.pop(file, None),
                )
        elif path.is_file():
            yield from load_file(path, max_bytes=max_bytes, extra_metadata=extra, target=target)
        else:
            yield Rejected(target.id_of(path), str(path), "no such file or directory")


def _inner(name: str) -> tuple[PurePosixPath, bool]:
    """The file's name without its compression, and whether it had one: ``fs.md.gz``."""
    path = PurePosixPath(name)
    if path.suffix.lower() == COMPRESSED:
        return PurePosixPath(path.stem), True
    return path, False


def file_type(name: str) -> tuple[str, bool]:
    """(the type a file is read as, whether it is gzip-compressed): ``fs.md.gz`` → .md."""
    inner, compressed = _inner(name)
    return inner.suffix.lower(), compressed


def _unsupported(suffix: str, compressed: bool) -> str | None:
    """Why a file of this type is not read, or None when it is."""
    if compressed and suffix == ".jsonl":
        return "a compressed JSON Lines file is not read; decompress it first"
    if suffix in SUPPORTED:
        return None
    shown = f"{suffix}{COMPRESSED}" if compressed else suffix
    return (
        f"unsupported file type {shown or '(none)'!r}; supported: {', '.join(SUPPORTED)}"
        f" (each also gzip-compressed, {COMPRESSED})"
    )


def decompressed(raw: bytes, max_bytes: int) -> bytes:
    """A gzip file's content, read no further than one byte over ``max_bytes``.

    A file that decompresses past the limit (a compression bomb among them) or is no
    gzip stream is an error naming why.
    """
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
            content = stream.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise InvalidRequestError(f"not a readable gzip file ({exc})") from exc
    if len(content) > max_bytes:
        raise InvalidRequestError(
            f"decompressed, the file is over the {max_bytes:,}-byte limit "
            "(ingest.max_document_bytes)"
        )
    return content


def _stem(name: str) -> str:
    """The file's name without its type (and compression): ``fs.md.gz`` → ``fs``."""
    return _inner(name)[0].stem


def count_documents(
    paths: Sequence[Path], *, include: Sequence[str], exclude: Sequence[str]
) -> int:
    """How many documents :func:`load_paths` will yield, without parsing any file.

    The same walk; a JSON Lines file counts its non-blank lines (one record each). A
    progress total for ``lore ingest DIR``: cheap next to embedding what it counts.
    """
    total = 0
    for path in paths:
        files = list(_walk(path, include, exclude)) if path.is_dir() else [path]
        for file in files:
            if file_type(file.name) == (".jsonl", False) and file.is_file():
                with file.open("rb") as handle:
                    total += sum(1 for line in handle if line.strip())
            else:
                total += 1
    return total


def _census(
    files: Sequence[Path], max_bytes: int
) -> tuple[RepeatedBlocks | None, dict[Path, tuple[str, str]]]:
    """Count the repeated blocks of a directory's HTML pages; the pages converted on the way."""
    pages = [f for f in files if file_type(f.name)[0] in _HTML]
    chrome = RepeatedBlocks()
    if len(pages) < chrome.min_pages:
        return None, {}
    step = max(1, len(pages) / CENSUS_PAGES)
    sample = [pages[int(i * step)] for i in range(min(len(pages), CENSUS_PAGES))]
    converted: dict[Path, tuple[str, str]] = {}
    for page in sample:
        try:
            title, body = html_to_markdown(decode_text(read_file(page, max_bytes)))
        except InvalidRequestError:
            continue
        chrome.add(body, title)
        converted[page] = (title, body)
    return chrome, converted


def _walk(root: Path, include: Sequence[str], exclude: Sequence[str]) -> Iterator[Path]:
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = file.relative_to(root).as_posix()
        if any(fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(file.name, pat) for pat in exclude):
            continue
        if any(fnmatch.fnmatch(file.name, pat) or fnmatch.fnmatch(rel, pat) for pat in include):
            yield file


def document_id_for(path: Path, label: str | None = None) -> str:
    """The id a file gets as its own root's (labelled ``label`` or its directory's name)."""
    return plain_target(path, label).id_of(path)


def path_metadata(relative: PurePosixPath) -> dict[str, str]:
    """``path``, ``dir`` and ``ext`` metadata of a file at ``relative`` to the ingest root."""
    parent = relative.parent.as_posix()
    return {
        "path": relative.as_posix(),
        "dir": parent or ".",
        "ext": file_type(relative.name)[0].lstrip("."),
    }


def load_file(
    path: Path,
    *,
    max_bytes: int,
    extra_metadata: Metadata | None = None,
    target: Target | None = None,
    chrome: RepeatedBlocks | None = None,
    converted: tuple[str, str] | None = None,
) -> Iterator[LoadResult]:
    """Load one file (a JSON Lines file may yield many documents).

    ``target`` is the path given to ingest that holds the file, with its root (default:
    the file's own directory, named after it): the id and the path metadata are
    relative to that root. ``chrome`` holds the directory's repeated blocks and
    ``converted`` the page already converted while counting them (HTML only).
    """
    label, relative = (target or plain_target(path)).place(path)
    doc_id = f"{label}/{relative.as_posix()}"
    file_meta = path_metadata(relative)
    suffix, compressed = file_type(path.name)
    refused = _unsupported(suffix, compressed)
    if refused is not None:
        yield Rejected(doc_id, doc_id, refused)
        return
    if suffix == ".jsonl":  # limits apply per record; the file is streamed
        yield from _jsonl(path, doc_id, extra_metadata or {}, max_bytes, file_meta)
        return
    try:
        raw = read_file(path, max_bytes)
    except InvalidRequestError as exc:
        yield Rejected(doc_id, doc_id, str(exc))
        return
    yield from_bytes(
        raw, suffix, _stem(path.name), doc_id, doc_id, extra_metadata, file_meta, chrome, converted
    )


def read_file(path: Path, max_bytes: int) -> bytes:
    """A file's bytes (decompressed when it is gzip), within the size limit."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise InvalidRequestError(over_limit("file", size, max_bytes))
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidRequestError(f"cannot read file: {exc.strerror or exc}") from exc
    return decompressed(raw, max_bytes) if file_type(path.name)[1] else raw


def load_upload(
    name: str,
    raw: bytes,
    *,
    doc_id: str,
    max_bytes: int,
    extra_metadata: Metadata | None = None,
) -> Iterator[LoadResult]:
    """Load an uploaded file's bytes as if it were a file called ``name``."""
    suffix, compressed = file_type(name)
    source = f"upload:{name}"
    refused = _unsupported(suffix, compressed)
    if refused is not None:
        yield Rejected(doc_id, source, refused)
    elif suffix == ".jsonl":
        with tempfile.TemporaryDirectory() as tmp:
            staged = Path(tmp) / "upload.jsonl"
            staged.write_bytes(raw)
            yield from _jsonl(staged, doc_id, extra_metadata or {}, max_bytes, {})
    elif len(raw) > max_bytes:
        yield Rejected(doc_id, source, over_limit("upload", len(raw), max_bytes))
    else:
        try:
            content = decompressed(raw, max_bytes) if compressed else raw
        except InvalidRequestError as exc:
            yield Rejected(doc_id, source, str(exc))
            return
        yield from_bytes(content, suffix, _stem(name), doc_id, source, extra_metadata)


def from_bytes(
    raw: bytes,
    suffix: str,
    stem: str,
    doc_id: str,
    source: str,
    extra_metadata: Metadata | None = None,
    file_metadata: Mapping[str, Any] | None = None,
    chrome: RepeatedBlocks | None = None,
    converted: tuple[str, str] | None = None,
) -> LoadResult:
    """One document from a file's bytes, read by its type (suffix)."""
    try:
        text = decode_text(raw)
    except InvalidRequestError as exc:
        return Rejected(doc_id, source, str(exc))
    extra = extra_metadata or {}
    meta: dict[str, Any] = {}
    if suffix in _HTML:
        title, body = converted or html_to_markdown(text)
        if chrome is not None:
            body = chrome.strip(body)
            shared = chrome.shared(title)
            title = chrome.title(title)
            if shared:  # many pages bear it: it names none of them
                title = own_title(title, body, stem)
        target = redirect_target(text)
        if target is not None and len(body.split()) <= REDIRECT_MAX_WORDS:
            return Skipped(
                doc_id,
                source,
                f"a redirect: the page sends the reader on to {printable(target)[:200]} at "
                "once (meta refresh); the text is there",
            )
        if not body.strip():
            return Skipped(
                doc_id, source, "navigation only: the page holds links and chrome, no text to index"
            )
        if all(not line.strip() or _HEADING.match(line) for line in body.split("\n")):
            return Skipped(
                doc_id, source, "headings only: the page holds navigation, no text to index"
            )
    elif suffix in (".md", ".markdown"):
        try:
            meta, body, had_front_matter = _split_front_matter(text)
        except FrontMatterError as exc:
            return Rejected(doc_id, source, str(exc))
        if had_front_matter and not body.strip():
            return Skipped(doc_id, source, "front matter only, no body to index")
        body = rendered_markdown(body)
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


def own_title(shared: str, body: str, stem: str) -> str:
    """A name for a page whose title many pages share: its first heading, or its file name.

    The shared title follows unless the heading holds it already: "StringUtils — Source
    code" for one of a Javadoc tree's source listings, "Index - A" for a Sphinx index letter.
    """
    found = _ANY_HEADING.search(body)
    heading = found.group(1).strip(" \t#") if found else ""
    if heading and shared.casefold() in heading.casefold():
        return heading
    return f"{heading or stem} \u2014 {shared}" if shared else heading or stem


def decode_text(raw: bytes) -> str:
    """Decode UTF-8 (with or without BOM); binary or undecodable input is an error.

    A file whose NULs pass :data:`BINARY_NUL_SHARE` is binary; a stray NUL in text
    becomes U+FFFD, as CommonMark prescribes and a browser shows it.
    """
    if not raw.strip():
        raise InvalidRequestError("document is empty (0 bytes of text)")
    head = raw[:_SNIFF_BYTES]
    if any(part.count(b"\x00") > len(part) * BINARY_NUL_SHARE for part in (head, raw)):
        raise InvalidRequestError("binary file (contains NUL bytes); only text formats are read")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidRequestError(
            f"not UTF-8 text (invalid byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")


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
