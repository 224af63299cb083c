# The one image docker-compose.yml runs as api, worker and beat.
# Layers go from the slowest-changing to the fastest, so editing code rebuilds only the
# last two: the pinned CPU torch wheel, then the dependencies read from pyproject.toml,
# then the source, installed with --no-deps. tests/workers/test_dockerfile.py replays
# these RUN pip lines in a clean virtualenv (scripts/dockerfile_install.py).
# No HEALTHCHECK here: one image plays three roles, so docker-compose.yml gives each
# service its own check.
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

WORKDIR /app

# The CPU build of torch (no CUDA wheels); keep the pin equal to the Makefile's TORCH_SPEC.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0

# The dependencies alone: the core list plus the extras the services use (neo4j, mcp).
# torch is already satisfied above, so pip keeps the CPU build.
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; x = p['optional-dependencies']; print('\n'.join(p['dependencies'] + x['neo4j'] + x['mcp']))" > requirements.txt \
    && pip install -r requirements.txt \
    && rm requirements.txt

COPY README.md ./
COPY lore lore
COPY graph graph
COPY ingest ingest
COPY retrieval retrieval
COPY app app
COPY workers workers
COPY api api
RUN pip install --no-deps .

# Run as an unprivileged user; /data is its LORE_DATA_DIR (an API replica's local
# BM25/HNSW indexes; the store itself is PostgreSQL under compose).
RUN useradd --create-home --uid 10001 --user-group lore \
    && mkdir -p /data \
    && chown lore:lore /data
USER lore
# The server binds every interface of the container, so auth is on (`lore serve` refuses a
# non-loopback address with auth off): create a key with `lore keys create --admin`.
# Requests must name an allowed Host: add the name clients use (LORE_API__ALLOWED_HOSTS).
ENV LORE_DATA_DIR=/data
ENV LORE_AUTH__ENABLED=true \
    LORE_API__ALLOWED_HOSTS='["localhost","127.0.0.1","::1"]'
EXPOSE 8080
CMD ["lore", "serve", "--host", "0.0.0.0", "--port", "8080"]
