"""Prometheus metrics of the pipeline: counted where the work happens, read by the web app's /metrics.

Workers count rollouts generated and verified, verifier latency and outcome per kind, and the model
server's requests, retries and failures. Celery's prefork pool runs each job in a child process, so
counters live in prometheus-client's multiprocess mode: every process that has
`PROMETHEUS_MULTIPROC_DIR` in its environment when it starts writes its samples to files there, and
/metrics adds them up (settings.PASSBAND_METRICS_DIR names the same folder; docker-compose shares it
through the passband-data volume). Without it, /metrics shows this process's own counters only, as
in tests and `--inline` runs. `make run` (scripts/run-local.sh) names var/metrics for every
process it starts, as compose names its volume. Queue depth and campaign progress are read when
scraped, from the broker (Redis lists, or the filesystem broker's message files) and the
database, so any web process answers them exactly.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator

from prometheus_client import Counter, Histogram, values
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from engine.backends import openai_transport

logger = logging.getLogger(__name__)

if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    # Name each process's files by host and pid: containers sharing the folder reuse the same small pids.
    values.ValueClass = values.MultiProcessValue(process_identifier=lambda: f"{socket.gethostname()}-{os.getpid()}")

ROLLOUTS_GENERATED = Counter(
    "passband_rollouts_generated", "Rollouts sampled and stored (generation errors included).", ["model"]
)
ROLLOUTS_VERIFIED = Counter(
    "passband_rollouts_verified",
    "Rollouts scored, by verifier kind and outcome (pass, fail, error, timeout).",
    ["kind", "outcome"],
)
VERIFIER_SECONDS = Histogram(
    "passband_verifier_seconds",
    "Verifier latency per rollout, by kind.",
    ["kind"],
    buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0),
)
MODEL_REQUESTS = Counter(
    "passband_model_requests", "Requests to model servers, by result (ok, retry, error).", ["server", "result"]
)
MODEL_RETRIES = Counter("passband_model_retries", "Retried model server requests, by reason.", ["server", "reason"])
# Remote environment servers, MCP and OpenEnv alike (the `protocol` label): the metric names are the MCP
# path's, older than the OpenEnv one.
MCP_SESSIONS = Counter(
    "passband_mcp_sessions",
    "Rollout sessions with remote servers (MCP or OpenEnv) that ran to the end.",
    ["server", "protocol"],
)
MCP_FAILURES = Counter(
    "passband_mcp_failures",
    "Rollouts a remote server (MCP or OpenEnv) failed (infrastructure: asked for again), by reason.",
    ["server", "protocol", "reason"],
)
ROUNDS_REQUEUED = Counter(
    "passband_rounds_requeued",
    "Task rounds beat queued again after they stalled (a dead worker, lost broker messages, the database away).",
)
REWARD_DISAGREEMENTS = Counter(
    "passband_reward_disagreements", "Rollouts whose environment reward and Passband check disagree."
)
HTTP_REQUESTS = Counter(
    "passband_http_requests", "Web and API requests, by method and status class.", ["method", "status"]
)
HTTP_SECONDS = Histogram("passband_http_request_seconds", "Web and API response time.", ["method"])

QUEUES = ("default", "generate", "verify", "similarity")


def _on_backend_event(event: str, labels: dict[str, str]) -> None:
    """The openai backend's events (see openai_transport.EVENT_HOOKS) as counters."""
    server = labels.get("server", "")
    if event == "request":
        MODEL_REQUESTS.labels(server=server, result=labels.get("result", "")).inc()
    elif event == "retry":
        MODEL_RETRIES.labels(server=server, reason=labels.get("reason", "")).inc()


if _on_backend_event not in openai_transport.EVENT_HOOKS:
    openai_transport.EVENT_HOOKS.append(_on_backend_event)


def rollouts_generated(*, model: str, count: int) -> None:
    if count:
        ROLLOUTS_GENERATED.labels(model=model).inc(count)


def mcp_session(*, server: str, protocol: str = "mcp") -> None:
    MCP_SESSIONS.labels(server=server, protocol=protocol).inc()


def mcp_failure(*, server: str, reason: str, protocol: str = "mcp") -> None:
    MCP_FAILURES.labels(server=server, protocol=protocol, reason=reason).inc()


def rounds_requeued(*, count: int) -> None:
    ROUNDS_REQUEUED.inc(count)


def reward_disagreement() -> None:
    REWARD_DISAGREEMENTS.inc()


def rollouts_verified(*, verdicts: list[tuple[str, str, float]]) -> None:
    """Count (kind, outcome, latency in ms) verdicts."""
    counts: dict[tuple[str, str], int] = {}
    for kind, outcome, latency_ms in verdicts:
        counts[(kind, outcome)] = counts.get((kind, outcome), 0) + 1
        VERIFIER_SECONDS.labels(kind=kind).observe((latency_ms or 0.0) / 1000)
    for (kind, outcome), count in counts.items():
        ROLLOUTS_VERIFIED.labels(kind=kind, outcome=outcome).inc(count)


class ScrapeTimeCollector(Collector):
    """Queue depth per queue (Redis or filesystem broker) and the progress of running campaigns, read at scrape time."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._queues()
        yield from self._campaigns()

    def _queues(self) -> Iterator[GaugeMetricFamily]:
        from django.conf import settings

        url = settings.CELERY_BROKER_URL
        help_text = "Messages waiting in each Celery queue."
        depths: dict[str, int] = {}
        try:
            if url.startswith(("redis://", "rediss://")):
                depths = _redis_depths(url)
            elif url.startswith(("filesystem://", "passband-filesystem://")):
                depths = filesystem_depths(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
            else:
                help_text += f" Not read for the {url.partition(':')[0]} broker: only Redis and the filesystem broker."
        except Exception as error:  # noqa: BLE001 - a scrape must answer; the gauge is left empty
            logger.warning("metrics: broker unreachable: %s", error)
            help_text += f" The broker did not answer ({type(error).__name__})."
        family = GaugeMetricFamily("passband_queue_depth", help_text, labels=["queue"])
        for queue, depth in depths.items():
            family.add_metric([queue], depth)
        yield family

    def _campaigns(self) -> Iterator[GaugeMetricFamily]:
        from django.db.models import Count, Q

        from calibration.models import Campaign, CampaignItem

        statuses = GaugeMetricFamily("passband_campaigns", "Campaigns by status.", labels=["status"])
        for row in Campaign.objects.values("status").annotate(count=Count("id")).order_by():
            statuses.add_metric([row["status"]], row["count"])
        yield statuses
        items = GaugeMetricFamily(
            "passband_campaign_items",
            "Task versions of running campaigns, done or still sampling.",
            labels=["campaign", "state"],
        )
        rows = (
            CampaignItem.objects.filter(campaign__status=Campaign.Status.RUNNING)
            .values("campaign_id")
            .annotate(done=Count("id", filter=Q(done=True)), total=Count("id"))
            .order_by()
        )
        for row in rows:
            items.add_metric([str(row["campaign_id"]), "done"], row["done"])
            items.add_metric([str(row["campaign_id"]), "open"], row["total"] - row["done"])
        yield items


def _redis_depths(url: str) -> dict[str, int]:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2)
    with client.pipeline() as pipe:
        for queue in QUEUES:
            pipe.llen(queue)
        return dict(zip(QUEUES, pipe.execute()))


def filesystem_depths(folder: str) -> dict[str, int]:
    """Messages waiting per queue in kombu's filesystem broker: one file `<ms>_<uuid>.<queue>.msg` each
    in its data folder, until a worker takes it (as Redis's list length counts)."""
    depths = dict.fromkeys(QUEUES, 0)
    with os.scandir(folder) as entries:
        for entry in entries:
            queue = entry.name.partition(".")[2].removesuffix(".msg")
            if queue in depths and entry.name.endswith(".msg"):
                depths[queue] += 1
    return depths


def metrics_text(*, multiprocess_dir: str, scrape_time: bool = True) -> tuple[bytes, str]:
    """The exposition text and its content type: the multiprocess folder's samples (when named) or this
    process's, plus (`scrape_time`) the gauges read from the broker and the database now."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess

    registry = CollectorRegistry()
    if multiprocess_dir:
        multiprocess.MultiProcessCollector(registry, path=multiprocess_dir)
    else:
        registry = REGISTRY
    text = generate_latest(registry)
    if not scrape_time:
        return text, CONTENT_TYPE_LATEST
    extra = CollectorRegistry()
    extra.register(ScrapeTimeCollector())
    return text + generate_latest(extra), CONTENT_TYPE_LATEST
