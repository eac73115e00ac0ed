"""Every destructive button asks first: dismissing the dialog changes nothing, accepting acts.

The page fixture fails any test whose pages met a Content-Security-Policy violation, so these also
show that the confirmations run under `script-src 'self'` (an inline onclick would be blocked)."""

import pytest

from accounts.models import ApiToken
from accounts.services import api_token_create
from calibration.models import Campaign, ProbeModel
from curation.models import Task, TaskStatus
from tests.factories import import_tasks, math_task

pytestmark = pytest.mark.django_db(transaction=True)


def click_and_answer(page, selector: str, *, accept: bool) -> str:
    """Click `selector`, answer the confirmation dialog it must open, and return the dialog's text."""
    with page.expect_event("dialog") as dialog_info:
        page.once("dialog", lambda dialog: dialog.accept() if accept else dialog.dismiss())
        page.click(selector)
    return dialog_info.value.message


def test_cancel_campaign_asks_first(page, live_server, sign_in, alice, arithmetic):
    model = ProbeModel.objects.create(name="probe", backend="openai", base_url="http://127.0.0.1:9/v1")
    campaign = Campaign.objects.create(
        environment=arithmetic, probe_model=model, created_by=alice, seed=1, status=Campaign.Status.PAUSED
    )
    sign_in(page, "alice")
    page.goto(f"{live_server.url}/campaigns/{campaign.pk}/")
    # The buttons sit in the fragment htmx swaps every 2 s: ask from a swapped-in one.
    page.evaluate(
        "() => new Promise((swapped) => document.body.addEventListener('htmx:afterSwap', swapped, {once: true}))"
    )
    cancel = "#campaign-actions button.danger"
    assert f"Cancel campaign #{campaign.pk}?" in click_and_answer(page, cancel, accept=False)
    page.reload()  # had the form been sent, the page would now say cancelled
    page.wait_for_selector("#campaign-progress [data-status=paused]")
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.PAUSED

    click_and_answer(page, cancel, accept=True)
    page.wait_for_selector("#campaign-progress [data-status=cancelled]")
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.CANCELLED


def test_revoke_token_asks_first(page, live_server, sign_in, alice):
    token, _ = api_token_create(user=alice, name="ci's token", scopes=["read"])
    sign_in(page, "alice")
    page.goto(live_server.url + "/tokens/")
    revoke = "form[action$='/revoke/'] button"
    assert click_and_answer(page, revoke, accept=False).startswith("Revoke ci's token?")
    page.reload()
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None

    click_and_answer(page, revoke, accept=True)
    page.wait_for_load_state()
    page.wait_for_selector(revoke, state="detached")
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def test_apply_to_all_on_the_task_list_asks_first(page, live_server, sign_in, alice, arithmetic):
    import_tasks(
        arithmetic, alice, *[math_task(f"t-{i}", question=f"What is {i} + 1?", answer=str(i + 1)) for i in range(3)]
    )
    sign_in(page, "alice")
    page.goto(live_server.url + "/tasks/?environment=arithmetic&status=draft")
    page.select_option("#bulk-actions select[name=action]", "submit")
    question = click_and_answer(page, "#bulk-actions button[type=submit]", accept=False)
    assert question == "Apply to all 3 tasks matching this filter?"
    page.reload()
    assert set(Task.objects.values_list("status", flat=True)) == {TaskStatus.DRAFT}

    page.select_option("#bulk-actions select[name=action]", "submit")
    click_and_answer(page, "#bulk-actions button[type=submit]", accept=True)
    page.wait_for_selector("text=3 task(s) submitted for review; 0 skipped.")
    assert set(Task.objects.values_list("status", flat=True)) == {TaskStatus.SUBMITTED}


def test_apply_to_all_in_the_review_queue_asks_first(page, live_server, sign_in, alice, bob, arithmetic):
    import_tasks(arithmetic, alice, math_task("a", question="What is 1 + 1?", answer="2"))
    import_tasks(arithmetic, alice, math_task("b", question="What is 2 + 2?", answer="4"))
    Task.objects.update(status=TaskStatus.SUBMITTED)
    sign_in(page, "bob")
    page.goto(live_server.url + "/review/")
    assert click_and_answer(page, "#bulk-form button", accept=False) == "Apply to all 2 matching tasks?"
    page.reload()
    assert set(Task.objects.values_list("status", flat=True)) == {TaskStatus.SUBMITTED}

    click_and_answer(page, "#bulk-form button", accept=True)
    page.wait_for_selector("#review-empty")
    assert set(Task.objects.values_list("status", flat=True)) == {TaskStatus.APPROVED}


def test_an_htmx_button_asks_before_htmx_sends(page, live_server, sign_in, alice, allow_console_errors):
    """confirm.js answers htmx:confirm, so a button that posts through htmx itself waits for the answer."""
    allow_console_errors.append("/probe-htmx/")  # the button this test adds posts to a path that is not there
    sign_in(page, "alice")
    page.goto(live_server.url + "/tokens/")
    sent = []
    page.on("request", lambda request: sent.append(request.url) if "/probe-htmx/" in request.url else None)
    page.evaluate(
        """() => {
          const button = document.createElement("button");
          button.id = "htmx-danger";
          button.setAttribute("hx-post", "/probe-htmx/");
          button.setAttribute("hx-swap", "none");
          button.dataset.confirm = "Really?";
          document.querySelector("main").append(button);
          htmx.process(button);
        }"""
    )
    assert click_and_answer(page, "#htmx-danger", accept=False) == "Really?"
    with page.expect_request("**/probe-htmx/"):
        click_and_answer(page, "#htmx-danger", accept=True)
    # Request events arrive in order: one sent after the dismissal would be listed before this one.
    assert len(sent) == 1
