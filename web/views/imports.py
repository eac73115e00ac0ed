"""The column-mapping step of an upload: a dataset's columns and first rows, the mapping, a preview
of the first five tasks, then the import as a background job."""

import hashlib
import json

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render

from accounts.errors import ServiceError
from curation import files, import_jobs, import_mappings, policy
from curation.models import ImportJob
from engine import input_rules, verifiers
from engine.task_mapping import EXTRACTORS, ROW_NUMBER, TEXT_FIELDS, ColumnMapping, MappingError, suggest_mapping
from engine.task_sources import TaskSource

FORM_FIELDS = TEXT_FIELDS
PREVIEW_CELL_CHARS = 300


def _form_from_post(post) -> dict:
    form = {name: post.get(name, "") for name in (*FORM_FIELDS, "verifier_kind", "verifier_config", "save_as")}
    form["metadata_columns"] = post.getlist("metadata_columns")
    return form


def _form_from_mapping(config: dict, name: str = "") -> dict:
    verifier = dict(config.get("verifier") or {})
    kind = verifier.pop("kind", "")
    form = {name: config.get(name, "") for name in FORM_FIELDS}
    form.update(
        metadata_columns=list(config.get("metadata_columns", [])),
        verifier_kind=kind,
        verifier_config=json.dumps(verifier) if verifier else "",
        save_as=name,
    )
    return form


def _mapping_from_form(form: dict) -> ColumnMapping:
    """The form's mapping; MappingError names the field that is wrong."""
    verifier = None
    if form["verifier_kind"]:
        try:
            config = input_rules.json_text(form["verifier_config"] or "{}")
        except input_rules.InputError as error:
            raise MappingError("verifier", f"its settings are {error}") from None
        if not isinstance(config, dict):
            raise MappingError("verifier", 'its settings must be a JSON object, like {"tolerance": 0.01}')
        verifier = {**config, "kind": form["verifier_kind"]}
    fields = {name: form[name] for name in FORM_FIELDS}
    return ColumnMapping.from_dict(fields | {"metadata_columns": form["metadata_columns"], "verifier": verifier})


def _shown(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= PREVIEW_CELL_CHARS else text[:PREVIEW_CELL_CHARS] + "…"


def _fingerprint(mapping: ColumnMapping) -> str:
    """Which mapping a preview showed: Import goes ahead only with the mapping that was previewed."""
    return hashlib.sha256(json.dumps(mapping.as_dict(), sort_keys=True).encode()).hexdigest()[:16]


def _preview_tasks(preview) -> list[dict]:
    if preview is None:
        return []
    return [
        {
            "number": number,
            "key": draft.key if draft else None,
            "prompt": draft.prompt if draft else [],
            "answer": draft.answer if draft else "",
            "verifier": json.dumps(draft.verifier) if draft else "",
            "problems": problems,
        }
        for number, draft, problems in preview.tasks
    ]


def _mapping_form(request, *, action: str, saved, file_preview) -> dict:
    """The mapping form: as posted, a saved mapping chosen by name, or one suggested from the columns."""
    if action:
        return _form_from_post(request.POST)
    if request.GET.get("mapping"):
        chosen = get_object_or_404(saved, name=request.GET["mapping"])
        return _form_from_mapping(chosen.config, chosen.name)
    first_row = file_preview.rows[0][1] if file_preview.rows else None
    return _form_from_mapping(suggest_mapping(file_preview.columns, first_row))


def _import_start(request, *, job, form: dict, mapping) -> bool:
    """Save the mapping when asked and queue the import; False (with a message) when a service refused."""
    try:
        if form["save_as"].strip():
            import_mappings.import_mapping_save(
                environment=job.environment, name=form["save_as"].strip(), mapping=mapping, by=request.user
            )
        import_jobs.import_job_start(job=job, mapping=mapping)
    except ServiceError as error:
        messages.error(request, str(error))
        return False
    return True


@policy.page("import_job_map")
def import_job_map(request, job_id: int):
    """Map a stored upload's columns to tasks; Preview shows the first five, Import queues the job."""
    job = policy.get_for(request.user, policy.CHANGE, ImportJob.objects.select_related("environment"), pk=job_id)
    if job.status != ImportJob.Status.MAPPING:
        return redirect("import_job_detail", job_id=job.pk)
    try:
        # The stored upload, read on this machine (a temporary copy when it is in object storage).
        with files.stored_file_local(job.path) as local:
            return _mapping_page(request, job=job, source=TaskSource(filename=job.filename, path=str(local)))
    except FileNotFoundError:
        raise Http404("The uploaded file is gone; upload it again.") from None


def _mapping_page(request, *, job: ImportJob, source: TaskSource):
    environment = job.environment
    file_preview = import_mappings.import_preview(environment=environment, source=source, mapping=None)
    saved = environment.import_mappings.all()
    action = request.POST.get("action", "") if request.method == "POST" else ""
    form = _mapping_form(request, action=action, saved=saved, file_preview=file_preview)

    preview, previewed, status = None, "", 200
    if action in ("preview", "import") and not file_preview.problems:
        try:
            mapping = _mapping_from_form(form)
        except MappingError as error:
            messages.error(request, f"Mapping, {error.field or 'form'}: {error.reason}")
            status = 400
        else:
            preview = import_mappings.import_preview(environment=environment, source=source, mapping=mapping)
            previewed = _fingerprint(mapping) if preview.ok else ""
            if action == "import" and preview.ok and request.POST.get("previewed") != previewed:
                messages.error(request, "The mapping changed since its preview: check these tasks, then import.")
                status = 400
            elif action == "import" and preview.ok:
                if _import_start(request, job=job, form=form, mapping=mapping):
                    return redirect("import_job_detail", job_id=job.pk)
                status = 400
            if not preview.ok:
                status = 400
    for problem in file_preview.problems:
        messages.error(request, str(problem))
    return render(
        request,
        "curation/import_mapping.html",
        {
            "job": job,
            "environment": environment,
            "columns": file_preview.columns,
            "rows": [
                (number, [_shown(row.get(column)) for column in file_preview.columns])
                for number, row in file_preview.rows
            ],
            "unit": source.unit,
            "skipped": file_preview.skipped,
            "form": form,
            "saved_mappings": saved,
            "extractors": EXTRACTORS.items(),
            "verifier_kinds": verifiers.KINDS,
            "row_number": ROW_NUMBER,
            "preview": preview,
            "preview_tasks": _preview_tasks(preview),
            "previewed": previewed,
        },
        status=status if not file_preview.problems else 400,
    )
