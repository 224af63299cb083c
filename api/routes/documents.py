"""``/v1/documents``: ingest, list, read back (text and chunks), delete."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, Field, ValidationError, model_validator
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.deps import IngestRuntimeDep, NamespaceQuery, PrincipalDep, RuntimeDep, SettingsDep
from api.ingest_queue import IngestQueue, Ticket, text_bytes
from api.routes.jobs import JobOut, job_out
from app import service
from app.ingest import ingest, queued, run_inline
from app.jobs import JobStore
from app.listing import MAX_PAGE, DocumentView, read_chunk, read_document
from app.readback import document_page
from app.services import JobServices
from ingest.loaders import load_upload, make_document
from lore import jsonsafe
from lore.errors import InvalidRequestError, LoreError, NotFoundError
from lore.flow import Step
from lore.models import (
    DocumentInfo,
    DocumentStatus,
    Loaded,
    metadata_problem,
    unaddressable,
    unstorable,
)
from retrieval.index_set import IndexSet

router = APIRouter(prefix="/v1", tags=["documents"])

MetadataValue = str | int | float | bool | list[str] | list[int] | list[float]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("an id must have a character that is not whitespace")
    problem = unaddressable(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _storable(value: str) -> str:
    problem = unstorable(value, "the value")
    if problem is not None:
        raise ValueError(problem)
    return value


def _storable_metadata(value: dict[str, Any]) -> dict[str, Any]:
    problem = metadata_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


DocumentIdIn = Annotated[str, Field(min_length=1, max_length=1000), AfterValidator(_not_blank)]
TextIn = Annotated[str, Field(max_length=50_000_000), AfterValidator(_storable)]
TitleIn = Annotated[str, Field(max_length=1000), AfterValidator(_storable)]
MetadataIn = Annotated[
    dict[str, MetadataValue], Field(max_length=200), AfterValidator(_storable_metadata)
]


class DocumentIn(BaseModel):
    """One document to store (the same id again replaces it)."""

    id: DocumentIdIn
    text: TextIn
    title: TitleIn = ""
    metadata: MetadataIn = Field(default_factory=dict)


class IngestRequest(BaseModel):
    """``{"id", "text", "metadata", "wait"}``, or ``{"documents": [...], "wait"}``."""

    model_config = {
        "json_schema_extra": {
            "examples": [
                {
                    "id": "runbooks/payments-504.md",
                    "text": "When payments-api answers HTTP 504, check the ledger pool.",
                    "metadata": {"env": "production", "service": "payments-api"},
                    "wait": True,
                }
            ]
        }
    }

    id: DocumentIdIn | None = None
    text: TextIn | None = None
    title: TitleIn = ""
    metadata: MetadataIn = Field(default_factory=dict)
    documents: list[DocumentIn] | None = Field(None, min_length=1)
    wait: bool = Field(False, description="answer once the documents are searchable")

    @model_validator(mode="after")
    def _one_form(self) -> IngestRequest:
        single = self.id is not None or self.text is not None
        if single == (self.documents is not None):
            raise ValueError("send either `id` and `text`, or `documents` (a list)")
        if single and (self.id is None or self.text is None):
            raise ValueError("a single document needs both `id` and `text`")
        return self

    def items(self) -> list[DocumentIn]:
        """The documents, whichever form was sent."""
        if self.documents is not None:
            return self.documents
        return [
            DocumentIn(
                id=self.id or "", text=self.text or "", title=self.title, metadata=self.metadata
            )
        ]


class ChunkOut(BaseModel):
    """A stored chunk of a document."""

    id: str
    ordinal: int
    heading: str
    text: str


class DocumentOut(BaseModel):
    """What the store knows of a document (text and chunks when asked for)."""

    id: str
    source: str
    title: str
    metadata: dict[str, Any]
    status: str = Field(description="pending, done or failed")
    error: str | None = Field(description="why it failed, when it did")
    chunks: int
    updated_at: str
    text: str | None = Field(None, description="with ?include=text: the stored text")
    text_reconstructed: bool = Field(
        False, description="the text was joined from the chunks (stored before texts were kept)"
    )
    chunk_list: list[ChunkOut] | None = Field(None, description="with ?include=chunks")


class ChunkDetail(ChunkOut):
    """A chunk with the document it belongs to."""

    document_id: str
    source: str
    title: str
    metadata: dict[str, Any]


class DocumentPageOut(BaseModel):
    """One page of ``GET /v1/documents``."""

    total: int = Field(description="documents matching, over all pages")
    offset: int
    limit: int
    documents: list[DocumentOut]


def document_out(info: DocumentInfo, view: DocumentView | None = None) -> DocumentOut:
    """The response shape of a document row (and its text and chunks)."""
    chunk_list = None
    if view is not None and view.chunks is not None:
        chunk_list = [
            ChunkOut(id=c.id, ordinal=c.ordinal, heading=c.heading, text=c.text)
            for c in view.chunks
        ]
    return DocumentOut(
        id=info.id,
        source=info.source,
        title=info.title,
        metadata=dict(info.metadata),
        status=info.status.value,
        error=info.error,
        chunks=info.chunk_count,
        updated_at=info.updated_at,
        text=view.text if view is not None else None,
        text_reconstructed=view.text_reconstructed if view is not None else False,
        chunk_list=chunk_list,
    )


_UPLOAD_BODY = {
    "requestBody": {
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/IngestRequest"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "file": {"type": "array", "items": {"type": "string", "format": "binary"}},
                        "metadata": {"type": "string", "description": "a JSON object"},
                        "id": {
                            "type": "string",
                            "description": "the document id (one file), or an id prefix "
                            "`ID/<file name>` (several files); default: the file name",
                        },
                        "wait": {"type": "boolean"},
                    },
                    "required": ["file"],
                }
            },
        },
        "required": True,
    }
}


def add_schemas(schema: dict[str, Any]) -> dict[str, Any]:
    """Put the JSON body's models into an OpenAPI document's components.

    The route reads its body itself (JSON or multipart), so FastAPI does not add them.
    """
    _, defs = models_json_schema(
        [(IngestRequest, "validation")], ref_template="#/components/schemas/{model}"
    )
    schema.setdefault("components", {}).setdefault("schemas", {}).update(defs["$defs"])
    return schema


def _upload_id(given: str, name: str, *, several: bool) -> str:
    """An uploaded file's document id: the form's ``id`` (a prefix for several files)."""
    if not given:
        return name
    return f"{given.rstrip('/')}/{name}" if several else given


async def _parse(request: Request, max_bytes: int) -> tuple[list[Loaded], bool]:
    kind = request.headers.get("content-type", "")
    if kind.startswith("multipart/form-data"):
        async with request.form() as form:  # closes the spooled upload files
            extra = jsonsafe.loads(str(form.get("metadata") or "{}"), what="form field `metadata`")
            if not isinstance(extra, dict):
                raise InvalidRequestError("form field `metadata` must be a JSON object")
            uploads = [f for f in form.getlist("file") if not isinstance(f, str)]
            if not uploads:
                raise InvalidRequestError("multipart upload without a `file` part")
            given = str(form.get("id") or "").strip()
            if len(given) > 1000:
                raise InvalidRequestError("form field `id` is longer than 1000 characters")
            items: list[Loaded] = []
            for upload in uploads:
                name = upload.filename or "upload.txt"
                doc_id = _upload_id(given, name, several=len(uploads) > 1)
                raw = await upload.read()
                items.extend(
                    load_upload(name, raw, doc_id=doc_id, max_bytes=max_bytes, extra_metadata=extra)
                )
            wait = str(form.get("wait", "")).lower() in ("1", "true", "yes")
        return items, wait
    try:
        body = IngestRequest.model_validate_json(await request.body())
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False)) from None
    docs = [
        make_document(d.id, d.id, d.text, d.title, d.metadata, max_bytes=max_bytes)
        for d in body.items()
    ]
    return docs, body.wait


def _first_http_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The HTTP error (e.g. the body limit's 413) inside an exception group, else the group."""
    matched, _ = group.split(StarletteHTTPException)
    found: BaseException | None = matched
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    return group if found is None else found


@router.post(
    "/documents",
    response_model=JobOut,
    status_code=202,
    openapi_extra=_UPLOAD_BODY,
    responses={
        200: {"model": JobOut, "description": "with wait: the job has ended"},
        429: {"description": "the namespace's share of the ingest queue is used: Retry-After"},
    },
)
async def post_documents(
    request: Request,
    runtime: IngestRuntimeDep,
    principal: PrincipalDep,
    settings: SettingsDep,
    namespace: NamespaceQuery = None,
) -> Any:
    """Store documents (JSON, or files as multipart) as a job; returns it, or waits for it.

    The job runs off the request threads (workers, or the server's ingest pool). With
    ``wait`` the answer is 200 once the job ends, or 202 with the job as it stands after
    ``LORE_API__WAIT_TIMEOUT_S``. A namespace past its share of the queue gets 429.
    """
    try:
        items, wait = await _parse(request, settings.ingest.max_document_bytes)
    except BaseExceptionGroup as group:  # a streamed body over the limit, read through
        raise _first_http_error(group) from None  # a middleware's task group: its 413
    if len(items) > settings.api.max_batch_documents:
        raise InvalidRequestError(
            f"{len(items)} documents in one request; the limit is "
            f"{settings.api.max_batch_documents} (LORE_API__MAX_BATCH_DOCUMENTS)"
        )
    queue: IngestQueue = request.app.state.ingest_queue
    ticket = await asyncio.to_thread(queue.admit, principal.namespace(namespace), text_bytes(items))
    try:
        job_id = await asyncio.to_thread(
            lambda: _start(runtime.job_services(), queue, ticket, items)
        )
    except BaseException:
        queue.release(ticket)
        raise
    jobs = await asyncio.to_thread(runtime.jobs)
    # queued: once the workers have ended the job, the indexes catch up here
    indexes = runtime.indexes if queued(runtime.settings) else None
    ended = await _await_job(jobs, indexes, job_id, settings.api.wait_timeout_s) if wait else False
    job = await asyncio.to_thread(service.get_job, jobs, job_id)
    if job is None:  # pragma: no cover - the job was just created
        raise NotFoundError(f"job {job_id} vanished")
    out = job_out(job)
    return JSONResponse(out.model_dump(mode="json"), status_code=200 if ended else 202)


def _start(services: JobServices, queue: IngestQueue, ticket: Ticket, items: list[Loaded]) -> str:
    """Stage the job and hand it to the broker or the ingest pool; returns its id."""
    jobs = services.jobs
    if queued(services.settings):
        job_id = ingest(services, items, wait=False).job_id
        queue.follow_queued(ticket, job_id, jobs)
        return job_id
    job_id = jobs.create("ingest")
    jobs.stage(job_id, items, keep_text=False)
    ticket.job_id = job_id
    queue.run(ticket, lambda: run_inline(services, job_id, items, staged=True))
    return job_id


async def _await_job(
    jobs: JobStore, indexes: IndexSet | None, job_id: str, timeout_s: float
) -> bool:
    """Wait (holding no thread) until the job ends; False when ``timeout_s`` passed first.

    ``indexes`` (a queued job's) are caught up once it has ended.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    delay = 0.05
    while True:
        job = await asyncio.to_thread(service.get_job, jobs, job_id)
        if job is None or job.state != "running":
            if indexes is not None:
                await asyncio.to_thread(jobs.walked, job_id, Step.SYNC_INDEXES)
                await asyncio.to_thread(indexes.catch_up)
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(min(delay, max(0.0, deadline - loop.time())))
        delay = min(delay * 2, 0.5)


DocumentId = Annotated[
    str,
    Path(min_length=1, max_length=1000, description="its id or its printed source, e.g. docs/a.md"),
]
Include = Annotated[
    str | None,
    Query(
        pattern=r"^(text|chunks)(,(text|chunks))*$",
        max_length=20,
        description="comma-separated: `text`, `chunks`",
    ),
]
StatusQuery = Annotated[DocumentStatus | None, Query(description="only documents of this status")]
FilterQuery = Annotated[
    str | None,
    Query(
        alias="filter",
        max_length=10_000,
        description='a metadata filter as JSON, as in a query\'s metadata_filter: {"env": "prod"}',
    ),
]


def _filter(raw: str | None) -> dict[str, Any] | None:
    if not raw:
        return None
    parsed = jsonsafe.loads(raw, what="`filter`")
    if not isinstance(parsed, dict):
        raise InvalidRequestError("`filter` must be a JSON object")
    return parsed


@router.get("/documents", response_model=DocumentPageOut)
async def list_documents(
    runtime: RuntimeDep,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    status: StatusQuery = None,
    metadata_filter: FilterQuery = None,
    prefix: Annotated[str, Query(max_length=1000, description="ids starting with this")] = "",
) -> DocumentPageOut:
    """A page of the namespace's documents by id, filtered by metadata and status."""
    page = await asyncio.to_thread(
        document_page,
        runtime.store,
        runtime.searcher,
        offset=offset,
        limit=limit,
        status=status,
        metadata_filter=_filter(metadata_filter),
        prefix=prefix,
    )
    return DocumentPageOut(
        total=page.total,
        offset=page.offset,
        limit=page.limit,
        documents=[document_out(d) for d in page.documents],
    )


@router.get("/documents/{document_id:path}", response_model=DocumentOut)
async def get_document(
    document_id: DocumentId, runtime: RuntimeDep, include: Include = None
) -> DocumentOut:
    """A stored document: status (or failure reason), metadata, and its text and chunks."""
    parts = set((include or "").split(","))
    view = await asyncio.to_thread(
        read_document, runtime.store, document_id, text="text" in parts, chunks="chunks" in parts
    )
    if view is None:
        raise NotFoundError(f"no document {document_id!r}")
    return document_out(view.info, view)


@router.delete("/documents/{document_id:path}")
async def delete_document(document_id: DocumentId, runtime: RuntimeDep) -> dict[str, Any]:
    """Delete a document from the store, the indexes and the graph.

    Its chunks' mentions, the entities and relations only they supported go too, and
    the reports of the communities they touched are rewritten before the answer:
    ``graph`` says what was removed and how many reports were refreshed.
    """
    from app.lifecycle import delete

    resolved = await asyncio.to_thread(runtime.store.resolve_document_id, document_id)
    target = resolved or document_id
    result = await asyncio.to_thread(lambda: delete(runtime.job_services(), [target]))
    if result["state"] != "done":
        raise LoreError(f"delete job {result['job_id']} {result['state']}: {result.get('error')}")
    return {"id": target, **result}


@router.get("/chunks/{chunk_id}", response_model=ChunkDetail)
async def get_chunk(
    chunk_id: Annotated[str, Path(min_length=1, max_length=200)], runtime: RuntimeDep
) -> ChunkDetail:
    """One stored chunk and its document (what citations and entity sources point to)."""
    chunk = await asyncio.to_thread(read_chunk, runtime.store, chunk_id)
    if chunk is None:
        raise NotFoundError(f"no chunk {chunk_id!r}")
    return ChunkDetail(
        id=chunk.id,
        ordinal=chunk.ordinal,
        heading=chunk.heading,
        text=chunk.text,
        document_id=chunk.document_id,
        source=chunk.source,
        title=chunk.title,
        metadata=dict(chunk.metadata),
    )
