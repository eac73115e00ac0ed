"""A release file as an HTTP download, one rule for the page and the API (curation/files.py streams it, or
redirects to a signed URL of the object store)."""

from __future__ import annotations

from django.http import Http404, HttpResponse

from curation import files
from releases import services
from releases.models import Release

CONTENT_TYPES = {"jsonl": "application/x-ndjson", "parquet": "application/vnd.apache.parquet"}


def release_file_response(*, release: Release, format: str, file_type: str) -> HttpResponse:
    """The built file `format.file_type` of a ready release, with its sha256 from the manifest in
    X-Checksum-SHA256; 404 when the storage does not have it."""
    file_name = f"{format}.{file_type}"
    stored = services.release_file_name(release=release, format=format, file_type=file_type)
    try:
        return files.stored_file_response(
            stored,
            filename=f"release-{release.pk}-{file_name}",
            content_type=CONTENT_TYPES[file_type],
            checksum=release.manifest.get("files", {}).get(file_name, {}).get("sha256", ""),
        )
    except FileNotFoundError:
        raise Http404(f"Release {release.pk} has no file {file_name} in storage.") from None
