"""FastAPI dependencies: the runtime built in the app's lifespan."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from workers.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    """The process's runtime (built once, in the lifespan)."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
