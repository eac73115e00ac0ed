"""Create and edit environments in the app: name, domain, texts, default verifier, thresholds (with
the deployment's defaults filled in) and the default completion budget of their probes; and an
environment's page: where its tool worlds come from (plug-in, package, version; MCP server), their tools,
their health over the last hour and its tasks' bands."""

import json

from django import forms
from django.conf import settings
from django.contrib import messages
from django.db import transaction
from django.shortcuts import redirect, render

from accounts.errors import ServiceError
from calibration import selectors as calibration_selectors
from calibration import services as calibration_services
from calibration.models import ProbeModel
from curation import gameability, policy, selectors, services
from curation.models import Environment
from curation.thresholds import ThresholdError, thresholds_validate
from engine import input_rules
from engine.verifiers.base import VerifierConfigError
from engine.verifiers.gameability import fixtures_parse


class EnvironmentForm(forms.Form):
    name = forms.SlugField(
        max_length=80, help_text="Letters, digits, '-' and '_'; used in URLs and the API. Fixed once created."
    )
    title = forms.CharField(max_length=200, required=False)
    domain = forms.CharField(max_length=40, initial="math", help_text="math, code, tool use, workflow…")
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    guidelines = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}), required=False, help_text="What authors should know."
    )
    default_verifier = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        help_text='JSON, e.g. {"kind": "math"}; tasks without a verifier use it. Blank: none.',
    )
    verifier_fixtures = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        label="Verifier fixtures",
        help_text='A JSON list, run against every task\'s verifier: [{"kind": "zero_reward", "completion": '
        '"I am not sure."}]. Kinds: full_reward, zero_reward, malformed, determinism; {answer} in a completion '
        "is the task's reference answer.",
    )
    # Their bounds are checked once, in clean(), by curation.thresholds.
    floor = forms.FloatField(help_text="Below it a task is too hard.")
    retire_at = forms.FloatField(help_text="At or above it a task is retired.")
    max_new_tokens = forms.IntegerField(
        min_value=1,
        max_value=32768,
        required=False,
        help_text="Default completion budget of its probes; blank: the probe model's.",
    )

    def clean_default_verifier(self) -> dict:
        text = self.cleaned_data["default_verifier"].strip()
        if not text:
            return {}
        try:
            value = input_rules.json_text(text)
        except input_rules.InputError as error:
            raise forms.ValidationError(f"{str(error)[:1].upper()}{str(error)[1:]}.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('A JSON object, e.g. {"kind": "math"}.')
        return value

    def clean_verifier_fixtures(self) -> list:
        text = self.cleaned_data["verifier_fixtures"].strip()
        if not text:
            return []
        try:
            return fixtures_parse(input_rules.json_text(text), where="fixtures")
        except (input_rules.InputError, VerifierConfigError) as error:
            raise forms.ValidationError(f"{error}.") from None

    def clean(self):
        data = super().clean()
        floor, retire_at = data.get("floor"), data.get("retire_at")
        if floor is not None and retire_at is not None:
            try:
                thresholds_validate(floor=floor, retire_at=retire_at)
            except ThresholdError as error:
                self.add_error(error.field, str(error))
        return data


@policy.page("environment_create")
def environment_create(request):
    form = EnvironmentForm(
        request.POST or None, initial={"floor": settings.PASSBAND_FLOOR, "retire_at": settings.PASSBAND_RETIRE}
    )
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        fixtures = data.pop("verifier_fixtures")
        try:
            environment = services.environment_create(**data)
            gameability.environment_fixtures_set(environment=environment, fixtures=fixtures)
        except ServiceError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, f"Environment {environment.name} created: upload tasks to it next.")
            return redirect("environment_list")
    return render(request, "curation/environment_form.html", {"form": form, "environment": None})


@policy.page("environment_edit")
def environment_edit(request, environment_name: str):
    environment = policy.get_for(request.user, policy.CHANGE, Environment.objects.all(), name=environment_name)
    initial = {
        field: getattr(environment, field)
        for field in ("name", "title", "domain", "description", "guidelines", "floor", "retire_at", "max_new_tokens")
    }
    initial["default_verifier"] = json.dumps(environment.default_verifier) if environment.default_verifier else ""
    initial["verifier_fixtures"] = json.dumps(environment.verifier_fixtures) if environment.verifier_fixtures else ""
    form = EnvironmentForm(request.POST or None, initial=initial)
    form.fields["name"].disabled = True
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            with transaction.atomic():
                services.environment_update(
                    environment=environment,
                    title=data["title"],
                    domain=data["domain"],
                    description=data["description"],
                    guidelines=data["guidelines"],
                    default_verifier=data["default_verifier"],
                    max_new_tokens=data["max_new_tokens"],
                    clear_max_new_tokens=data["max_new_tokens"] is None,
                )
                rebanded = None
                if (data["floor"], data["retire_at"]) != (environment.floor, environment.retire_at):
                    rebanded = calibration_services.environment_thresholds_set(
                        environment=environment, floor=data["floor"], retire_at=data["retire_at"], by=request.user
                    )
            note = _fixtures_note(environment=environment, fixtures=data["verifier_fixtures"])
        except ServiceError as error:
            form.add_error(None, str(error))
        else:
            note += f"; {rebanded} calibrations re-banded from stored rollouts" if rebanded is not None else ""
            messages.success(request, f"Environment {environment.name} saved{note}.")
            return redirect("environment_list")
    return render(request, "curation/environment_form.html", {"form": form, "environment": environment})


def _fixtures_note(*, environment, fixtures: list) -> str:
    """Store changed fixtures and re-run the gameability audit over the environment when it is small enough."""
    if fixtures == environment.verifier_fixtures:
        return ""
    gameability.environment_fixtures_set(environment=environment, fixtures=fixtures)
    if environment.tasks.count() > FIXTURE_RECHECK_LIMIT:
        return f"; fixtures saved: run manage.py verifier_test --environment {environment.name} to re-check its tasks"
    report = gameability.environment_gameability_check(environment=environment)
    return f"; fixtures saved and {report.checked} task(s) re-checked, {len(report.gameable)} gameable"


# Above this many tasks a fixture change is re-checked by manage.py verifier_test, not in the request.
FIXTURE_RECHECK_LIMIT = 500


# The window of the health panel: long enough to cover a campaign's recent rounds, short enough to show now.
HEALTH_HOURS = 1.0


@policy.page("environment_detail")
def environment_detail(request, environment_name: str):
    environment = policy.get_for(request.user, policy.SEE, Environment.objects.all(), name=environment_name)
    return render(
        request,
        "curation/environment_detail.html",
        {
            "environment": environment,
            "worlds": selectors.environment_worlds(environment=environment, user=request.user),
            "task_sources": selectors.environment_task_sources(environment=environment, user=request.user),
            "server": environment.remote_server,
            "health": calibration_selectors.environment_health(environment=environment, hours=HEALTH_HOURS),
            "health_hours": HEALTH_HOURS,
            "bands": calibration_selectors.environment_band_counts(environment=environment, user=request.user),
            "can_manage": policy.allows(request.user, policy.CHANGE, environment),
            "false_pass": calibration_selectors.false_pass_rates(environment=environment, user=request.user),
            # Staff probe a sample; an author probes one task of their own (policy.RULES, "probe_variants").
            "can_probe_variants": policy.allows(request.user, policy.PROBE_VARIANTS, environment),
            "can_probe_own_variant": policy.is_author(request.user),
            "probe_models": ProbeModel.objects.all(),
        },
    )
