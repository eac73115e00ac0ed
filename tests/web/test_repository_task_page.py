"""A repository task's page shows its snapshot's files and its tests; other tasks' pages do not."""

import pytest
from django.urls import reverse

from curation.services import environment_create
from tests.curation.test_repo_tasks import tiny_task
from tests.engine.repo_tasks.tiny_repo import FILES
from tests.factories import import_tasks

pytestmark = pytest.mark.django_db


def test_the_task_page_shows_the_file_tree_and_the_tests(client, alice, media):
    environment = environment_create(name="repositories", domain="code")
    import_tasks(environment, alice, tiny_task(FILES))
    client.force_login(alice)
    page = client.get(reverse("task_detail", args=["repositories", "calc-clamp"])).content.decode()
    assert 'id="repository-files"' in page and "<code>calc/ops.py</code>" in page
    assert "1 FAIL_TO_PASS, 2 PASS_TO_PASS" in page
    assert "<code>tests/test_ops.py::test_clamp_high</code>" in page
    assert "clamp() ignores its upper bound" in page  # the issue, as the prompt


def test_other_tasks_have_no_repository_section(client, alice, arithmetic):
    import_tasks(arithmetic, alice, {"key": "sum", "prompt": "1+1?", "answer": "2"})
    client.force_login(alice)
    page = client.get(reverse("task_detail", args=["arithmetic", "sum"])).content.decode()
    assert 'id="repository-tests"' not in page
