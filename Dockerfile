# The image docker-compose.yml runs as api, worker and beat.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY lore lore
COPY graph graph
COPY ingest ingest
COPY retrieval retrieval
COPY workers workers
COPY api api
RUN pip install --no-cache-dir torch && pip install --no-cache-dir .
ENV LORE_DATA_DIR=/data
