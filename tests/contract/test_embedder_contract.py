"""One contract for every Embedder: the packaged local model and an OpenAI-compatible endpoint."""

from collections.abc import Iterator

import numpy as np
import pytest

from lore.embedders import Embedder, LocalEmbedder, OpenAIEmbedder
from lore.errors import BackendUnavailableError, InvalidRequestError
from tests.openai_test_server import OpenAITestServer


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer(dim=48) as srv:
        yield srv


@pytest.fixture(params=["local", "openai"])
def embedder(
    request: pytest.FixtureRequest, local_embedder: LocalEmbedder, server: OpenAITestServer
) -> Embedder:
    if request.param == "local":
        return local_embedder
    return OpenAIEmbedder(
        "test-embed", base_url=server.base_url, api_key=None, dimensions=None, batch_size=3
    )


def test_shapes_norms_and_determinism(embedder: Embedder) -> None:
    texts = [
        "database timeout on ledger",
        "printing book covers",
        "ledger database timeouts",
        "x",
        "y",
    ]
    matrix = embedder.embed_documents(texts)
    assert matrix.shape == (5, embedder.dimension) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-4)
    query = embedder.embed_query("database timeout on ledger")
    assert np.allclose(query, matrix[0], atol=1e-4)
    assert embedder.embed_documents([]).shape[0] == 0


def test_related_texts_are_closer(embedder: Embedder) -> None:
    a, b, c = embedder.embed_documents(
        ["database timeout on ledger", "ledger database timeout now", "printing book covers"]
    )
    assert float(a @ b) > float(a @ c)


def test_openai_errors_are_classified(server: OpenAITestServer) -> None:
    client = OpenAIEmbedder("test-embed", base_url=server.base_url, api_key="k", dimensions=8)
    server.fail_next(503, 503, 503)  # the client retries twice, then gives up
    with pytest.raises(BackendUnavailableError):
        client.embed_documents(["a"])
    server.fail_next(400)
    with pytest.raises(InvalidRequestError):
        client.embed_documents(["a"])
    assert client.embed_documents(["a"]).shape == (1, 8)
    assert client.name == "openai:test-embed"
