"""One contract for every Reranker: a tiny local cross-encoder and the HTTP API styles."""

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lore.errors import BackendUnavailableError, ConfigurationError, InvalidRequestError
from lore.tokens import packaged_model_dir
from retrieval.rerank import Reranker, open_reranker
from tests.openai_test_server import OpenAITestServer

PASSAGES = ["ledger database timeout on commit", "book cover printing", "database timeout"]


def build_tiny_cross_encoder(target: Path) -> Path:
    """A randomly initialised 1-layer BERT cross-encoder with the packaged vocabulary."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(target)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(packaged_model_dir() / name, target / name)
    return target


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"))


@pytest.fixture(params=["local", "tei", "cohere", "jina"])
def reranker(
    request: pytest.FixtureRequest, tiny_model: Path, server: OpenAITestServer
) -> Reranker:
    if request.param == "local":
        return open_reranker("local", model=str(tiny_model))
    path = "/rerank" if request.param == "tei" else "/v1/rerank"
    return open_reranker("http", url=server.root_url + path, style=request.param, model="m")


def test_one_finite_score_per_passage_deterministic(reranker: Reranker) -> None:
    first = reranker.rerank("database timeout", PASSAGES)
    assert len(first) == 3 and all(isinstance(s, float) for s in first)
    assert reranker.rerank("database timeout", PASSAGES) == first
    assert reranker.rerank("database timeout", []) == []
    assert reranker.name


@pytest.mark.parametrize("style", ["tei", "cohere"])
def test_http_scores_follow_the_server_in_input_order(server: OpenAITestServer, style: str) -> None:
    path = "/rerank" if style == "tei" else "/v1/rerank"
    client = open_reranker("http", url=server.root_url + path, style=style)
    assert client.rerank("database timeout", PASSAGES) == [1.0, 0.0, 1.0]


def test_http_failures_are_classified(server: OpenAITestServer) -> None:
    client = open_reranker("http", url=server.root_url + "/rerank", style="tei", timeout_s=0.5)
    server.fail_next(503)
    with pytest.raises(BackendUnavailableError):
        client.rerank("q", PASSAGES)
    server.fail_next(400)
    with pytest.raises(InvalidRequestError):
        client.rerank("q", PASSAGES)
    server.delay_next(1.5)
    with pytest.raises(BackendUnavailableError):
        client.rerank("q", PASSAGES)
    time.sleep(1.2)  # let the delayed answer finish before the next request
    wrong = open_reranker("http", url=server.root_url + "/rerank", style="cohere")
    with pytest.raises(InvalidRequestError, match="unexpected shape"):
        wrong.rerank("q", PASSAGES)


def test_missing_local_model_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="never downloaded"):
        open_reranker("local", model=str(tmp_path / "nope")).rerank("q", ["p"])
    with pytest.raises(ConfigurationError):
        open_reranker("bogus")
