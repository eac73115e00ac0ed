"""Every page a person visits, at 390 px and on a desktop: no console error or uncaught exception on any,
nothing wider than a phone, the navigation in five groups, code in prompts as written, an upload's
result page without a script error, and plotly.js fetched only where a chart is drawn."""

import pytest

from curation import repo_demo
from curation.repo_snapshots import snapshot_store
from curation.services import environment_create
from tests.e2e.test_phone_width import OVERFLOWING, PHONE, workbench  # noqa: F401 - the fixture
from tests.factories import import_tasks, jsonl, math_task

pytestmark = pytest.mark.django_db(transaction=True)

CODE_PROMPT = 'def add(a, b):\n    """Add "a" and b.\n    >>> add(2, 3)\n    5\n    """\n'


@pytest.fixture
def more_pages(alice, arithmetic, workbench, media):  # noqa: F811 - the fixture imported above
    code = environment_create(name="humaneval", domain="code", default_verifier={"kind": "exact"})
    import_tasks(code, alice, {"key": "add", "prompt": "```python\n" + CODE_PROMPT + "```", "answer": "5"})
    repositories = environment_create(name="repositories", domain="code")
    import_tasks(repositories, alice, next(repo_demo.task_rows(store=snapshot_store)))
    return {**workbench, "repo_task": repositories.tasks.get()}


def _sign_in(page, live_server, username: str) -> None:
    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw-" + username)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)


def test_no_console_error_and_a_phone_width_on_every_page(
    new_context, live_server, more_pages, staff, screenshot, allow_console_errors, console_problems
):
    allow_console_errors.append("/no-such-page/: Failed to load resource")  # the 404 page, asked for on purpose
    campaign, repo_task = more_pages["campaign"], more_pages["repo_task"]
    pages = [
        "/",
        "/tasks/",
        "/tasks/?flag=gameable",
        "/tasks/humaneval/add/",
        f"/tasks/repositories/{repo_task.key}/",
        "/rollouts/",
        f"/rollouts/?campaign={campaign.pk}",
        "/review/",
        "/campaigns/",
        f"/campaigns/{campaign.pk}/",
        "/dashboard/",
        "/dashboard/?environment=arithmetic",
        "/mcp-servers/",
        "/history/",
        "/tokens/",
        "/releases/",
        "/no-such-page/",
    ]
    for viewport in (PHONE, {"width": 1400, "height": 1000}):
        page = new_context(viewport=viewport, is_mobile=viewport is PHONE).new_page()
        _sign_in(page, live_server, "sam")
        too_wide = {}
        for path in pages:
            response = page.goto(live_server.url + path)
            assert response.status == (404 if path == "/no-such-page/" else 200), path
            page.wait_for_load_state("networkidle")
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > viewport["width"]:
                too_wide[path] = (width, page.evaluate(OVERFLOWING))
                screenshot(page, "too-wide-" + path.strip("/").replace("/", "-").replace("?", "-"))
        assert not console_problems, "\n".join(console_problems)
        assert not too_wide, "\n".join(f"{path}: {width} px, {what}" for path, (width, what) in too_wide.items())


def test_navigation_prompts_uploads_and_charts_as_a_person_meets_them(
    new_context, live_server, more_pages, tmp_path, console_problems
):
    page = new_context(viewport=PHONE, is_mobile=True).new_page()
    _sign_in(page, live_server, "alice")
    # Five groups by what a person is doing, on one line of a phone; an author sees no Review group.
    groups = page.locator("nav.groups > details > summary").all_inner_texts()
    assert groups == ["Curate", "Probe", "Release", "Operate"]
    assert page.locator("nav.groups").bounding_box()["height"] < 60
    page.locator("#nav-probe summary").click()
    page.locator("#nav-probe a", has_text="Campaigns").click()
    page.wait_for_url(lambda url: url.endswith("/campaigns/"))

    # Code in a prompt reads as written: no entity shown as text.
    page.goto(live_server.url + "/tasks/humaneval/add/")
    page.wait_for_selector(".markdown.rendered")
    prompt = page.locator(".message-turn .markdown").inner_text()
    assert ">>> add(2, 3)" in prompt and '"""Add "a" and b.' in prompt
    assert "&gt;" not in prompt and "&quot;" not in prompt

    # An upload's result page replaces the form's page: no script error on it.
    upload = tmp_path / "tasks.jsonl"
    upload.write_bytes(jsonl(math_task("uploaded", question="What is 9 + 9?", answer="18")))
    page.goto(live_server.url + "/tasks/upload/?environment=arithmetic")
    page.set_input_files("input[name=file]", str(upload))
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector("text=1 new task(s)")

    # plotly.js only where a chart is drawn.
    html = page.goto(live_server.url + "/dashboard/?environment=arithmetic").text()
    assert "plotly-basic" not in html.split("<body")[0]
    page.wait_for_selector("#pass-rate-histogram[data-drawn=true]")
    assert page.evaluate("!!window.Plotly")
    page.goto(live_server.url + "/campaigns/")
    assert not page.evaluate("!!window.Plotly")
    assert not console_problems, "\n".join(console_problems)
