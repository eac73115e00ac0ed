"""Browser tests: Playwright (Python) driving Debian's chromium against pytest-django's live_server.

Never runs `playwright install`: it uses /usr/bin/chromium, and skips with a reason when it is absent.
Every page the tests open reports its console errors and uncaught exceptions, Content-Security-Policy
violations among them (csp_watch.js logs each as an error); a test that met one fails at teardown, naming
the page and the message. A test that visits a page expected to log one (a 403 it asks for on purpose)
says so with `allow_console_errors`.
"""

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-results" / "screenshots"
CSP_WATCH = Path(__file__).with_name("csp_watch.js")

# Playwright's sync API keeps an event loop in this thread; the ORM calls the tests make between
# browser steps are still plain synchronous calls, so Django's async guard does not apply.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


# One browser per test module: Playwright's sync API keeps an asyncio loop running in this thread while
# it is open, and tests after it in the same process (a trainer library's asyncio.run) need none.
@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip("Browser tests need Debian's chromium at /usr/bin/chromium (apt-get install chromium).")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()


@pytest.fixture
def allow_console_errors() -> list[str]:
    """Substrings of the console errors this test expects, matched against "page: message (source)" (a page
    it asks for on purpose that answers 403 or 404 logs "Failed to load resource"); a test appends to it."""
    return []


@pytest.fixture
def console_problems() -> list[str]:
    """The console errors and uncaught exceptions the test's pages have had so far, less those allowed: a test
    may assert on it as it goes; the test fails at teardown if it is not empty."""
    return []


@pytest.fixture
def new_context(browser, allow_console_errors, console_problems):
    """Opens browser contexts that record every console error and uncaught exception (CSP violations among
    them) in `console_problems`; the test fails at teardown if any page had one it did not allow."""
    contexts, problems = [], console_problems

    def record(message) -> None:
        source = (message.location or {}).get("url") or "?"  # the resource that failed, or the script
        problem = f"{message.page.url if message.page else '?'}: {message.text} ({source})"
        if message.type == "error" and not any(allowed in problem for allowed in allow_console_errors):
            problems.append(problem)

    def record_uncaught(page):
        page.on("pageerror", lambda error: problems.append(f"{page.url}: uncaught {error}"))

    def open_context(**options):
        context = browser.new_context(**options)
        context.set_default_timeout(15_000)
        context.add_init_script(path=str(CSP_WATCH))
        context.on("console", record)
        context.on("page", record_uncaught)
        contexts.append(context)
        return context

    yield open_context
    for context in contexts:
        context.close()
    assert not problems, "console errors or uncaught exceptions:\n" + "\n".join(problems)


@pytest.fixture
def page(new_context):
    return new_context(viewport={"width": 1400, "height": 1000}).new_page()


@pytest.fixture
def screenshot():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def sign_in(live_server):
    """Sign in through the login form, as the named user of tests/conftest.py (password pw-<name>)."""

    def sign_in(page, username: str) -> None:
        page.goto(live_server.url + "/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", "pw-" + username)
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/login/" not in url)

    return sign_in
