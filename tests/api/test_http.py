"""HTTP API with TestClient; the runtime is injected through a dependency override."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.settings import load_settings
from workers.namespaces import Namespaces


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[TestClient]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("http"))
    namespaces = Namespaces(settings, embedder=local_embedder)
    namespaces.runtime("default").ingest(
        [
            SourceDocument(
                "a.md",
                "a.md",
                "payments-api returns HTTP 504 on ledger timeouts",
                "A",
                {"env": "production"},
            ),
            SourceDocument(
                "b.md",
                "b.md",
                "staging gateway returns HTTP 504 during deploys",
                "B",
                {"env": "staging"},
            ),
        ],
        extract_graph=False,