"""``POST /v1/ask`` (routed questions) and ``POST /v1/questions/global`` (global only)."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import RuntimeDep
from retrieval.ask_contract import AskRequest, AskResponse, GlobalQuestionRequest

router = APIRouter(prefix="/v1", tags=["ask"])


@router.post("/ask", response_model=AskResponse)
async def ask(request: AskRequest, runtime: RuntimeDep) -> AskResponse:
    """Route a question (local, global or both) and answer it with citations."""
    return await runtime.queries().ask(request)


@router.post("/questions/global", response_model=AskResponse)
async def global_question(request: GlobalQuestionRequest, runtime: RuntimeDep) -> AskResponse:
    """Answer a corpus-wide question from the community reports (map-reduce).

    Without a built graph the answer falls back to local search, and the route says so.
    """
    return await runtime.queries().ask(AskRequest(**request.model_dump(), mode="global"))
