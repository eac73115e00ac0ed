"""A repository task's page shows its snapshot's files and its tests (other tasks' pages do not); the
trajectory viewer shows a repository rollout's patch as a diff."""

import pytest
from django.urls import reverse

from curation.services import environment_create
from tests.curation.test_repo_tasks import tiny_task
from tests.engine.repo_tasks.tiny_repo import FILES, REFERENCE_PATCH
from tests.factories import import_tasks, rollouts_with

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


def test_the_viewer_shows_a_repository_rollouts_patch_as_a_diff(client, alice, media):
    environment = environment_create(name="repositories", domain="code")
    import_tasks(environment, alice, tiny_task(FILES))
    task = environment.tasks.get()
    [single_turn, episode] = rollouts_with(task, alice, ["pass", "fail"], text=f"Fixed:\n```diff\n{REFERENCE_PATCH}```")
    episode.episode = {
        "environment": "repository",
        "messages": [{"role": "user", "content": "Fix clamp."}],
        "stop_reason": "answered",
        "error": None,
        "final_state": {
            "files_changed": ["README.md"],
            "patch": "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-old\n+new\n",
        },
    }
    episode.save(update_fields=["episode"])
    client.force_login(alice)
    page = client.get(reverse("trajectory_list"), {"task": "calc-clamp"}).content.decode()
    assert '<span class="diff-add">+    return max(low, min(value, high))</span>' in page  # the single-turn answer
    assert '<span class="diff-del">-    return max(low, value)</span>' in page
    assert "(the episode's edits)" in page and '<span class="diff-add">+new</span>' in page
