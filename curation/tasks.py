"""Celery tasks for curation: thin wrappers that load by id, call one service and are safe to run twice."""

from celery import shared_task
from django.contrib.auth import get_user_model

from curation import import_jobs, mcp_servers, server_schemas
from curation import judge_master_keys as master_keys
from curation.errors import CurationError
from curation.models import McpServer


@shared_task(
    bind=True, acks_late=True, reject_on_worker_lost=True, soft_time_limit=3600, time_limit=3660, max_retries=2
)
def import_tasks(self, job_id: int) -> str:
    """Import a stored task file; the report is kept on the job."""
    try:
        return import_jobs.import_job_run(job_id=job_id).status
    except Exception as error:
        if self.request.retries < self.max_retries:
            raise self.retry(exc=error, countdown=10) from error
        import_jobs.import_job_mark_failed(job_id=job_id, reason=f"the import could not run: {error}")
        raise


@shared_task(acks_late=True, reject_on_worker_lost=True, soft_time_limit=120, time_limit=150)
def check_remote_server(server_id: int) -> str:
    """Check a registered MCP or OpenEnv server (curation.mcp_servers.mcp_server_check); the answer is
    stored on the server for its page. Safe to run twice."""
    server = McpServer.objects.filter(pk=server_id).first()
    if server is None:
        return "gone"
    try:
        mcp_servers.mcp_server_check(server=server)
    except CurationError:
        return McpServer.CheckStatus.FAILED
    return McpServer.CheckStatus.OK


@shared_task(acks_late=True, reject_on_worker_lost=True, soft_time_limit=120, time_limit=150)
def accept_remote_server_tools(server_id: int, user_id: int) -> str:
    """Accept a remote server's tools as it lists them now (curation.server_schemas); safe to run twice."""
    server = McpServer.objects.filter(pk=server_id).first()
    user = get_user_model().objects.filter(pk=user_id).first()
    if server is None or user is None:
        return "gone"
    try:
        server_schemas.mcp_server_schema_accept(server=server, accepted_by=user)
    except CurationError:
        return McpServer.CheckStatus.FAILED
    return McpServer.CheckStatus.OK


@shared_task(acks_late=True, soft_time_limit=1800, time_limit=1860)
def judge_master_keys(judge: str) -> str:
    """Run the master-key battery on a judge's tasks; "skipped: ..." when the judge or its tasks are gone."""
    try:
        run = master_keys.judge_master_keys_run(judge=judge)
    except CurationError as error:
        return f"skipped: {error}"
    return f"{run.false_passes}/{run.trials}"
