"""The sampling policy an environment's dashboard speaks of, and what it promises there: the operating
characteristic of the stopping rule, of a table learned from the environment's own probes, and of
re-profiling a checkpoint (docs/calibration.md, docs/prediction.md)."""

from __future__ import annotations

from calibration.models import Calibration, Campaign
from calibration.services import side_information
from calibration.services.learning import environment_learning
from calibration.services.policies import policy_for, sampling_policy, thresholds_for
from curation.models import Environment
from engine import stats


def operating_characteristic(*, environment: Environment) -> dict:
    """What the stopping rule promises on this environment, exactly (no simulation), under the
    sampling policy its campaigns used.

    For each true pass rate: the probability of each label, of a wrong one (outside the
    indifference zones), and the rollouts it spends on average. The policy is that of the
    environment's latest campaign, fixed N or adaptive (the default adaptive policy when it has
    none); `policy` says which, with the campaign it came from. Under a fixed policy the fourth
    label is "undecided after N", the tasks whose N attempts do not decide a band.
    """
    campaign, policy = _latest_policy(environment)
    thresholds = thresholds_for(environment)
    curve = stats.operating_characteristic_curve(thresholds=thresholds, policy=policy)
    fixed = policy.kind == "fixed"
    learned = None
    kept = None
    strata = None
    probing = curve
    if campaign is not None and not fixed:
        learning = environment_learning(environment=environment, probe_model=campaign.probe_model, policy=policy)
        tables = None if learning is None else learning.tables
        if tables is not None and tables.table is not None:
            probing = stats.operating_characteristic_curve(
                thresholds=thresholds, policy=policy, pass_rates=curve.pass_rates, table=tables.table
            )
            learned = {"probe_model": campaign.probe_model.name, **_curve_series(probing)}
        elif learning is not None:  # enough tasks to learn from, and the rule was kept: say why
            kept = {"probe_model": campaign.probe_model.name, "rule_kept_because": learning.reason}
        if learning is not None and learning.strata_reason is not None:
            cuts = list(tables.cuts) if tables is not None else []
            strata = {
                "probe_model": campaign.probe_model.name,
                "source": learning.strata_source,
                "outcome": learning.strata_reason,
                "tables": len(tables.strata) if tables is not None else 0,
                # In the source's own terms: declared difficulties (higher: harder), or fitted logits.
                "cuts": sorted(-cut for cut in cuts) if learning.strata_source == side_information.DECLARED else cuts,
            }
    return {
        "environment": environment.name,
        "policy": {
            "kind": policy.kind,
            "description": policy_description(policy),
            "round_size": policy.fixed_n if fixed else policy.round_size,
            "cap": policy.fixed_n if fixed else policy.cap,
            "confidence": policy.confidence,
            "from_campaign": campaign.pk if campaign else None,
            "undecided_label": f"P(undecided after {policy.fixed_n})" if fixed else "P(borderline at the cap)",
        },
        "floor": environment.floor,
        "retire_at": environment.retire_at,
        "zones": {"floor": list(thresholds.floor_zone), "retire": list(thresholds.retire_zone)},
        "pass_rates": curve.pass_rates,
        "labels": curve.label_probabilities,
        # A wrong band, decided: the engine's `wrong` also counts an undecided task (no band), drawn apart.
        "wrong": _decided_wrong(curve),
        "expected_rollouts": curve.expected_attempts,
        # The table learned from the environment's own probes (docs/prediction.md), when its
        # latest campaign's probe model has one: what the rule becomes there.
        "learned": learned,
        # When the environment has enough tasks to learn from but the rule was kept: why.
        "learning": kept,
        # Tables per stratum of a score from side information (calibration.services.side_information),
        # once enough calibrated tasks have one: its source, how many tables (0: the strata kept the
        # rule, and "outcome" says why) and where they split.
        "strata": strata,
        # Behind the item-response prior, when that model is a checkpoint re-profiled here.
        "prior": _reprofile_prior(environment=environment, campaign=campaign, curve=probing, thresholds=thresholds),
    }


def _decided_wrong(curve: stats.OperatingCharacteristicCurve) -> list[float]:
    """Per pass rate, the chance of a band the zones do not accept: the curve's `wrong` less its undecided
    (borderline) label, which is no band at all and is drawn as its own line."""
    undecided = curve.label_probabilities["borderline"]
    return [max(wrong - none, 0.0) for wrong, none in zip(curve.wrong, undecided, strict=True)]


def _curve_series(curve: stats.OperatingCharacteristicCurve) -> dict:
    return {
        "labels": curve.label_probabilities,
        "wrong": _decided_wrong(curve),
        "expected_rollouts": curve.expected_attempts,
    }


def _reprofile_prior(
    *,
    environment: Environment,
    campaign: Campaign | None,
    curve: stats.OperatingCharacteristicCurve,
    thresholds: stats.Thresholds,
) -> dict | None:
    """The operating characteristic of re-profiling the latest campaign's checkpoint (its bands predicted
    by the item-response model where sure, the rest probed): the mixture over its tasks' uncertainties
    (``logit_sds``; a re-profile stored before them has only the median, ``logit_sd``); None unless
    that checkpoint was re-profiled in this environment."""
    if campaign is None or not campaign.probe_model.run:
        return None
    policy = (
        Calibration.objects.filter(
            probe_model=campaign.probe_model,
            task_version__task__environment=environment,
            predicted_probability__isnull=False,
        )
        .order_by("-updated_at")
        .values_list("policy", flat=True)
        .first()
    )
    if not policy or not policy.get("logit_sd"):
        return None
    spreads = policy.get("logit_sds") or [policy["logit_sd"]]
    prior = stats.reprofile_characteristic(
        curve=curve, thresholds=thresholds, sd=spreads, level=policy.get("level", 0.95)
    )
    return {
        "probe_model": campaign.probe_model.name,
        "logit_sd": policy["logit_sd"],
        "logit_sd_range": [min(spreads), max(spreads)],
        "level": policy.get("level", 0.95),
        "checkpoints": policy.get("checkpoints", []),
        **_curve_series(prior),
    }


def policy_description(policy: stats.SamplingPolicy) -> str:
    """A sampling policy in words, as the dashboard states it."""
    if policy.kind == "fixed":
        return (
            f"fixed N = {policy.fixed_n} rollouts per task, a band only where those {policy.fixed_n} attempts "
            f"decide it at confidence {policy.confidence}, else undecided"
        )
    return f"adaptive: rounds of {policy.round_size}, at most {policy.cap} rollouts, confidence {policy.confidence}"


def _latest_policy(environment: Environment) -> tuple[Campaign | None, stats.SamplingPolicy]:
    """The environment's latest campaign and its sampling policy (the default adaptive one without)."""
    campaign = environment.campaigns.order_by("-created_at", "-pk").first()
    if campaign is None:
        return None, stats.SamplingPolicy(kind="adaptive")
    return campaign, sampling_policy(policy_for(campaign), attempts=campaign.max_rollouts)


def campaign_policy_in_use(*, environment: Environment) -> dict:
    """The sampling policy the dashboard's promise is about, in words, and the campaign it came from."""
    campaign, policy = _latest_policy(environment)
    return {
        "campaign": campaign.pk if campaign else None,
        "kind": policy.kind,
        "description": policy_description(policy),
    }
