"""What the task page and the Harbor export read from a verifier kind: its page fragment (a fragment no
template folder holds is skipped, not a broken page) and its declared exports (a kind that declares none is
refused, with nothing written, rather than exported by a guess)."""

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from curation.services import environment_create
from engine.verifiers.base import Check
from engine.verifiers.kind import KindExample, KindExports, VerifierKind
from engine.verifiers.registry import kind_registry
from tests.factories import import_tasks

pytestmark = pytest.mark.django_db


def _check(config, *, completion, answer, prompt=None):
    return Check("pass" if completion == answer else "fail", "compared")


def registered(name, **traits):
    example = KindExample({"kind": name}, passing="yes", failing="no", answer="yes")
    kind = VerifierKind(name=name, parse_config=dict, check=_check, examples=(example,), **traits)
    kind_registry().register(kind)
    return kind


@pytest.fixture
def made_up_kinds():
    yield registered
    for name in ("silent", "paged", "misfiled"):
        kind_registry().unregister(name)


def task(key, kind):
    return {"key": key, "prompt": "Say yes.", "answer": "yes", "verifier": {"kind": kind}}


def test_an_export_refuses_a_kind_that_declares_no_exports(tmp_path, alice, made_up_kinds):
    made_up_kinds("silent")
    environment = environment_create(name="mixed-kinds", domain="math")
    report = import_tasks(environment, alice, task("plain", "exact"), task("quiet", "silent"))
    assert report.ok, report.summary()
    with pytest.raises(CommandError, match="quiet: verifier kind 'silent' declares no exports"):
        call_command("export_harbor", environment="mixed-kinds", out=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_a_kind_that_declares_rows_only_is_left_out_of_harbor_folders(tmp_path, alice):
    environment = environment_create(name="rows-only", domain="math")
    import_tasks(environment, alice, task("plain", "exact"))
    call_command("export_harbor", environment="rows-only", out=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_task_page_shows_the_kinds_fragment_and_skips_a_missing_one(client, alice, made_up_kinds):
    made_up_kinds(
        "paged",
        exports=KindExports(),
        page_fragment="curation/_verifier_llm_judge.html",
        page_context=lambda raw: {"judge": "referee"},
    )
    made_up_kinds("misfiled", exports=KindExports(), page_fragment="curation/_no_such_fragment.html")
    environment = environment_create(name="paged-kinds", domain="math")
    assert import_tasks(environment, alice, task("paged", "paged"), task("misfiled", "misfiled")).ok
    client.force_login(alice)
    paged = client.get(reverse("task_detail", args=["paged-kinds", "paged"]))
    assert paged.status_code == 200 and 'id="judge-agreement-link"' in paged.content.decode()
    assert "How judge referee agrees with people" in paged.content.decode()
    misfiled = client.get(reverse("task_detail", args=["paged-kinds", "misfiled"]))
    assert misfiled.status_code == 200 and 'id="verifier-config"' in misfiled.content.decode()
