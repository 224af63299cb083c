"""``/v1/documents`` (ingest, read, delete) and ``/v1/jobs/{id}``."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, Field, ValidationError, model_validator
from pydantic.json_schema import models_json_schema

from api.deps import IngestRuntimeDep, RuntimeDep, SettingsDep
from ingest.loaders import load_upload, make_document
from lore import jsonsafe
from lore.errors import InvalidRequestError, NotFoundError
from lore.models import Rejected, SourceDocument
from workers import service
from workers.ingest import ingest
from workers.service import JobView

router = APIRouter(prefix="/v1", tags=["documents"])

MetadataValue = str | int | float | bool | list[str] | list[int] | list[float]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("an id must have a character that is not whitespace")
    return value


DocumentIdIn = Annotated[str, Field(min_length=1, max_length=1000), AfterValidator(_not_blank)]


class DocumentIn(BaseModel):
    """One document to store (the same id again replaces it)."""

    id: DocumentIdIn
    text: str = Field(max_length=50_000_000)
    title: str = Field("", max_length=1000)
    metadata: dict[str, MetadataValue] = Field(default_factory=dict, max_length=200)


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
    text: str | None = Field(None, max_length=50_000_000)
    title: str = Field("", max_length=1000)
    metadata: dict[str, MetadataValue] = Field(default_factory=dict, max_length=200)
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


class JobOut(BaseModel):
    """A job and its documents' statuses."""

    job_id: str
    kind: str
    state: str = Field(description="running, done or failed")
    counts: dict[str, int] = Field(description="documents per status")
    documents: list[dict[str, Any]] = Field(description="id, status, reason (when failed)")
    detail: dict[str, Any] = Field(default_factory=dict)


class DocumentOut(BaseModel):
    """What the store knows of a document."""

    id: str
    source: str
    title: str
    metadata: dict[str, Any]
    status: str
    error: str | None
    chunks: int
    updated_at: str


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


def _out(job: JobView) -> JobOut:
    return JobOut(
        job_id=job.job_id,
        kind=job.kind,
        state=job.state,
        counts=job.counts,
        documents=job.documents,
        detail=job.detail,
    )


async def _parse(request: Request, max_bytes: int) -> tuple[list[SourceDocument | Rejected], bool]:
    kind = request.headers.get("content-type", "")
    if kind.startswith("multipart/form-data"):
        async with request.form() as form:  # closes the spooled upload files
            extra = jsonsafe.loads(str(form.get("metadata") or "{}"), what="form field `metadata`")
            if not isinstance(extra, dict):
                raise InvalidRequestError("form field `metadata` must be a JSON object")
            uploads = [f for f in form.getlist("file") if not isinstance(f, str)]
            if not uploads:
                raise InvalidRequestError("multipart upload without a `file` part")
            items: list[SourceDocument | Rejected] = []
            for upload in uploads:
                name = upload.filename or "upload.txt"
                raw = await upload.read()
                items.extend(
                    load_upload(name, raw, doc_id=name, max_bytes=max_bytes, extra_metadata=extra)
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


@router.post(
    "/documents",
    response_model=JobOut,
    status_code=202,
    openapi_extra=_UPLOAD_BODY,
    responses={200: {"model": JobOut, "description": "with wait: the job has ended"}},
)
async def post_documents(
    request: Request,
    runtime: IngestRuntimeDep,
    settings: SettingsDep,
    background: BackgroundTasks,
) -> Any:
    """Store documents (JSON, or files as multipart); returns the job, or waits for it."""
    items, wait = await _parse(request, settings.ingest.max_document_bytes)
    if len(items) > settings.api.max_batch_documents:
        raise InvalidRequestError(
            f"{len(items)} documents in one request; the limit is "
            f"{settings.api.max_batch_documents} (LORE_API__MAX_BATCH_DOCUMENTS)"
        )
    result = await asyncio.to_thread(
        ingest, runtime, items, wait=wait, defer=background.add_task, timeout_s=600.0
    )
    metrics = request.app.state.metrics
    job = await asyncio.to_thread(service.get_job, runtime, result.job_id)
    if job is None:  # pragma: no cover - the job was just created
        raise NotFoundError(f"job {result.job_id} vanished")
    for doc in job.documents:
        if doc["status"] in service.FINAL:
            metrics.ingested.labels(doc["status"]).inc()
    out = _out(job)
    status = 200 if wait else 202
    return JSONResponse(out.model_dump(mode="json"), status_code=status)


DocumentId = Annotated[str, Path(min_length=1, max_length=1000, description="e.g. docs/a.md")]


@router.get("/documents/{document_id:path}", response_model=DocumentOut)
async def get_document(document_id: DocumentId, runtime: RuntimeDep) -> DocumentOut:
    """A stored document's status, metadata and chunk count."""
    info = await asyncio.to_thread(runtime.store.get_document, document_id)
    if info is None:
        raise NotFoundError(f"no document {document_id!r}")
    return DocumentOut(
        id=info.id,
        source=info.source,
        title=info.title,
        metadata=dict(info.metadata),
        status=info.status.value,
        error=info.error,
        chunks=info.chunk_count,
        updated_at=info.updated_at,
    )


@router.delete("/documents/{document_id:path}")
async def delete_document(document_id: DocumentId, runtime: RuntimeDep) -> dict[str, Any]:
    """Delete a document from the store and the search indexes.

    The graph drops its contributions at the next ``graph build`` or refresh.
    """
    removed = await asyncio.to_thread(runtime.delete, document_id)
    return {"id": document_id, "deleted": True, "chunks_removed": removed}


@router.get("/jobs/{job_id}", response_model=JobOut)
async def get_job(
    job_id: Annotated[str, Path(min_length=1, max_length=100)], runtime: RuntimeDep
) -> JobOut:
    """An ingest or refresh job: state, counts per status, each document's status."""
    job = await asyncio.to_thread(service.get_job, runtime, job_id)
    if job is None:
        raise NotFoundError(f"no job {job_id!r}")
    return _out(job)
