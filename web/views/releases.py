"""Releases in the browser: build one with the API's filters, list them with their manifests, download files."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render

from accounts.errors import ServiceError
from calibration.models import Band, ProbeModel
from curation import policy
from curation.models import Environment, TaskStatus
from engine import formats
from releases import downloads
from releases import selectors as release_selectors
from releases import services as releases
from releases.errors import ReleaseError
from releases.models import Release, ReleaseStatus
from web.views import shared


def _release_filter(post) -> dict:
    """The release_create arguments from the form; ReleaseError names the field that is wrong."""
    probe_model = ProbeModel.objects.filter(name=post.get("probe_model", "")).first()
    if probe_model is None:
        raise ReleaseError(f"Probe model: no probe model named {post.get('probe_model', '')!r}.")
    environment = None
    if post.get("environment"):
        environment = Environment.objects.filter(name=post["environment"]).first()
        if environment is None:
            raise ReleaseError(f"Environment: no environment named {post['environment']!r}.")
    return {
        "probe_model": probe_model,
        "environment": environment,
        "band": post.get("band", Band.IN_BAND),
        "status": post.get("status", TaskStatus.APPROVED),
        "domain": post.get("domain", "").strip(),
        "exclude_contaminated": post.get("exclude_contaminated") == "on",
        "allow_empty": post.get("allow_empty") == "on",
    }


@policy.page("release_list")
def release_list(request):
    """GET: the form and the releases this user may see, newest first. POST: pin a release; a worker builds it."""
    form = request.POST if request.method == "POST" else {}
    if request.method == "POST":
        try:
            release = releases.release_create(user=request.user, **_release_filter(request.POST))
        except ServiceError as error:
            messages.error(request, str(error))
        else:
            pinned = release.items.count()
            messages.success(request, f"Release {release.pk} pinned {pinned} task(s); building its files.")
            return redirect("release_list")
    rows, page, has_next = shared.page_of(request, release_selectors.releases_visible_to(request.user), size=20)
    return render(
        request,
        "releases/release_list.html",
        {
            "releases": rows,
            "page": page,
            "has_next": has_next,
            "form": form,
            "probe_models": ProbeModel.objects.all(),
            "environments": Environment.objects.all(),
            "bands": Band.values,
            "statuses": TaskStatus.values,
            "file_names": [f"{format}.{file_type}" for format in formats.names() for file_type in formats.FILE_TYPES],
            "building": any(release.status in (ReleaseStatus.PENDING, ReleaseStatus.BUILDING) for release in rows),
        },
    )


@policy.page("release_file")
def release_file(request, release_id: int, file_name: str):
    """One built file of a ready release, as an attachment with its sha256 from the manifest."""
    release = policy.get_for(request.user, "export", Release.objects.all(), pk=release_id)
    format, _, file_type = file_name.partition(".")
    if format not in formats.names() or file_type not in formats.FILE_TYPES:
        raise Http404(f"No file {file_name}; formats: {', '.join(formats.names())}; types: jsonl, parquet.")
    if release.status != ReleaseStatus.READY:
        messages.error(request, f"Release {release.pk} is {release.status}, not ready: its files are not built yet.")
        return redirect("release_list")
    return downloads.release_file_response(release=release, format=format, file_type=file_type)
