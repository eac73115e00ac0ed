"""Column mappings saved per environment, and the preview of a mapped import.

A mapping (engine.task_mapping.ColumnMapping) turns the rows of someone else's dataset into
tasks. Authors save one under a name in an environment and reuse it from the browser or the
command line (`import_tasks FILE --environment NAME --mapping NAME`). Whoever may import into an
environment (authors, staff) may save and use its mappings; a saved mapping is changed only by
the author who saved it, or staff.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import islice

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from curation.errors import CurationError
from curation.models import Environment, ImportMapping
from curation.policy import CHANGE, allows
from engine import task_files
from engine.task_format import LineProblem, TaskDraft
from engine.task_mapping import ColumnMapping, MappingError
from engine.task_sources import SourceError, TaskSource

MAPPING_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,79}$")
PREVIEW_TASKS = 5


def import_mapping_save(
    *, environment: Environment, name: str, mapping: ColumnMapping, by: AbstractBaseUser
) -> ImportMapping:
    """Save `mapping` as `name` in `environment` (a new one, or the caller's own under that name)."""
    if not MAPPING_NAME.match(name):
        raise CurationError(
            f"Mapping name {name!r}: use 1-80 lowercase letters, digits, '-' or '_', starting with a letter or digit."
        )
    with transaction.atomic():
        saved = ImportMapping.objects.select_for_update().filter(environment=environment, name=name).first()
        if saved is None:
            try:
                with transaction.atomic():
                    return ImportMapping.objects.create(
                        environment=environment, name=name, config=mapping.as_dict(), created_by=by
                    )
            except IntegrityError:  # saved by someone else a moment ago
                raise CurationError(f"A mapping {name!r} was just saved in {environment.name}; try again.") from None
        if not allows(by, CHANGE, saved):
            raise CurationError(
                f"The mapping {name!r} of {environment.name} was saved by {saved.created_by}; choose another name."
            )
        saved.config = mapping.as_dict()
        saved.save(update_fields=["config", "updated_at"])
    return saved


def import_mapping_load(*, environment: Environment, name: str) -> ColumnMapping:
    """The mapping saved as `name` in `environment`; CurationError names the saved ones when absent."""
    saved = ImportMapping.objects.filter(environment=environment, name=name).first()
    if saved is None:
        names = ", ".join(environment.import_mappings.values_list("name", flat=True)) or "none yet"
        raise CurationError(f"No mapping {name!r} in {environment.name}; its mappings: {names}.")
    try:
        return ColumnMapping.from_dict(saved.config)
    except MappingError as error:
        raise CurationError(f"The saved mapping {name!r} is no longer valid ({error}); save it again.") from None


@dataclass
class Preview:
    """What a file holds and what its first tasks would be, before anything is written."""

    columns: list[str] = field(default_factory=list)
    rows: list[tuple[int, dict]] = field(default_factory=list)  # the first rows as the file has them
    tasks: list[tuple[int, TaskDraft | None, list[LineProblem]]] = field(default_factory=list)
    problems: list[LineProblem] = field(default_factory=list)  # the mapping's or the file's, not a row's
    skipped: list[LineProblem] = field(default_factory=list)  # lines the first rows passed over, and why

    @property
    def ok(self) -> bool:
        return bool(self.tasks) and not self.problems and all(draft is not None for _, draft, _ in self.tasks)


def import_preview(
    *, environment: Environment, source: TaskSource, mapping: ColumnMapping | None, count: int = PREVIEW_TASKS
) -> Preview:
    """The file's columns and first `count` rows, and, with a mapping, its first `count` tasks."""
    preview = Preview()
    max_line_bytes = settings.PASSBAND_MAX_LINE_BYTES
    try:
        preview.columns = source.columns(max_line_bytes=max_line_bytes)
    except SourceError as error:
        preview.problems = [LineProblem(source.filename, 0, "", str(error))]
        return preview
    preview.rows, preview.skipped = source.first_rows_and_problems(count, max_line_bytes=max_line_bytes)
    if mapping is None:
        return preview
    preview.problems = mapping.column_problems(preview.columns, filename=source.filename)
    if preview.problems:
        return preview
    drafts = task_files.iter_checked_drafts(
        source,
        default_verifier=environment.default_verifier,
        default_domain=environment.domain,
        max_line_bytes=max_line_bytes,
        mapping=mapping,
    )
    preview.tasks = list(islice(drafts, count))
    if not preview.tasks:
        preview.problems = [LineProblem(source.filename, 0, "", "the file holds no rows")]
    return preview
