# One image for every AgentWorks process; compose.yaml chooses the command per service.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LOG_JSON=true

WORKDIR /app

# Locked third-party dependencies first: this layer changes only with requirements.lock,
# which holds what the suite runs on and no test or lint tool (those are in
# requirements-dev.lock, for `make venv`; tests/test_packaging.py checks).
COPY requirements.lock ./
RUN pip install -r requirements.lock

# Then our own packages (proto, client, server and runtime share the `agentworks`
# namespace package).
COPY libs/ libs/
COPY services/ services/
COPY tools/ tools/
RUN pip install --no-deps --no-build-isolation \
        ./libs/agentworks-proto \
        ./libs/agentworks-core \
        ./libs/agentworks-client \
        ./libs/agentworks-server \
        ./libs/agentworks-runtime \
        ./libs/agentworks-agents \
        ./libs/agentworks-runner \
        ./services/messaging \
        ./services/functions \
        ./services/scheduler \
        ./services/gateway \
        ./tools/agentworks-cli \
        ./tools/agentworks-dev \
    && rm -rf libs services tools

RUN useradd --system --uid 10001 --home-dir /app agentworks \
    && mkdir -p /app/.agentworks \
    && chown agentworks /app/.agentworks
USER agentworks

CMD ["agentworks", "--help"]
