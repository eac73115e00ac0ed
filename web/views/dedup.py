"""The near-duplicate clusters page: reviewers keep one task of each cluster and take the others out."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.errors import ServiceError
from curation import policy
from curation import services as curation_services
from curation.models import Environment
from similarity import selectors, services


def _environment(value: str) -> Environment | None:
    return get_object_or_404(Environment, name=value) if value else None


def _back(environment: Environment | None):
    url = reverse("dedup_clusters")
    return redirect(f"{url}?environment={environment.name}" if environment else url)


@policy.page("dedup_clusters")
def dedup_clusters(request):
    environment = _environment(request.GET.get("environment", ""))
    clusters = selectors.near_duplicate_clusters(environment=environment)
    return render(
        request,
        "similarity/clusters.html",
        {"clusters": clusters, "environment": environment, "environments": Environment.objects.all()},
    )


@require_POST
@policy.page("dedup_keep_one")
def dedup_keep_one(request):
    """Keep the chosen version of a cluster; the other versions the page showed are taken out.

    Only those: a task that joined the cluster after the page was drawn is left for the next look.
    """
    environment = _environment(request.POST.get("environment", ""))
    cluster = _posted_cluster(request, environment)
    if cluster is None:
        return _back(environment)
    keep = next(version for version in cluster.versions if version.pk == _int(request.POST.get("keep")))
    shown = {_int(value) for value in request.POST.getlist("shown")}
    others = [version for version in cluster.versions if version.pk != keep.pk and version.pk in shown]
    try:
        result = services.cluster_keep_one(keep=keep, others=others, by=request.user)
    except ServiceError as error:
        messages.error(request, str(error))
    else:
        (messages.warning if result.refused else messages.success)(request, result.summary())
    return _back(environment)


@require_POST
@policy.page("dedup_dismiss")
def dedup_dismiss(request):
    """Not duplicates after all: resolve the cluster's flags and change no task."""
    environment = _environment(request.POST.get("environment", ""))
    cluster = _posted_cluster(request, environment)
    if cluster is None:
        return _back(environment)
    try:
        resolved = services.cluster_dismiss(versions=cluster.versions, by=request.user)
    except ServiceError as error:
        messages.error(request, str(error))
    else:
        keys = ", ".join(str(version.task) for version in cluster.versions)
        messages.success(request, f"Marked {keys} as not duplicates ({resolved} flags resolved).")
    return _back(environment)


@require_POST
@policy.page("dedup_recheck")
def dedup_recheck(request):
    """Queue a check of every version (of the chosen environment) against the corpus and the benchmarks."""
    environment = _environment(request.POST.get("environment", ""))
    curation_services.similarity_check_queue(environment=environment, recheck=True)
    messages.success(
        request,
        f"Checking every task of {environment.name if environment else 'every environment'} again in the background.",
    )
    return _back(environment)


def _posted_cluster(request, environment: Environment | None) -> selectors.Cluster | None:
    """The open cluster of the posted version (`keep`); None, with a message saying so, when there is none."""
    cluster = selectors.cluster_of(version_id=_int(request.POST.get("keep")), environment=environment)
    if cluster is None:
        messages.error(request, "That task is not in an open near-duplicate cluster any more; reload the page.")
    return cluster


def _int(value) -> int | None:
    return int(value) if str(value or "").isdigit() else None
