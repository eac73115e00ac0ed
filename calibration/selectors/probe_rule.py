"""Before an adaptive probe: how many rollouts its tasks are expected to use, from the stopping rule.

An adaptive probe stops each task once its band is decided, so the cap (rollouts per task at most) is only an
upper bound; a second probe of tasks the model already has attempts on stops sooner still (the rule's cap
counts every attempt). Each task's expected rollouts follow the rule the way a running campaign's time left
does (pace_rule.expected_ahead): its first round, then each round ahead weighted by the chance that the rule
still says "continue", the passes drawn from the task's own posterior predictive. A task with no attempts by
the model draws them from the environment's fitted pass-rate prior where there is one (the measured
distribution of its tasks' pass rates under the model), else from Jeffreys (an unknown pass rate).
"""

from __future__ import annotations

from collections import Counter

from calibration.costs import Expected
from calibration.models import Campaign, ProbeModel
from calibration.selectors.pace_rule import MAX_STATES, expected_ahead, rule_evidence
from calibration.services.learning import environment_prior
from curation.models import Environment
from engine import stats


def probe_expected_rollouts(
    *,
    environment: Environment,
    probe_model: ProbeModel,
    task_versions: list[int],
    cap: int,
    round_size: int,
    confidence: float = 0.95,
) -> Expected:
    """The rollouts an adaptive probe of `task_versions` (ids) with `cap` per task at most, in rounds of
    `round_size`, is expected to store under the stopping rule; the fewest it could (every task stopped after
    its first round); and what the expectation came from. At most MAX_STATES distinct (passes, attempts)
    states run the rule (the most common); tasks in the others count to the cap, and the basis says so."""
    campaign = Campaign(
        environment=environment,
        probe_model=probe_model,
        policy=Campaign.Policy.ADAPTIVE,
        round_size=round_size,
        max_rollouts=cap,
        confidence=confidence,
    )
    first_round = min(round_size, cap)
    evidence = rule_evidence(probe_model_id=probe_model.pk, campaign_id=None, versions=task_versions)
    states = Counter(evidence.get(version, (0, 0, 0))[:2] for version in task_versions)
    fresh = states.get((0, 0), 0)
    prior = environment_prior(environment=environment, probe_model=probe_model, cached=True) if fresh else None
    rollouts, capped = 0.0, 0
    for index, ((passes, attempts), tasks) in enumerate(states.most_common()):
        if index >= MAX_STATES:
            capped += tasks
            rollouts += tasks * cap
            continue
        ahead, _ = expected_ahead(
            campaign=campaign, passes=passes, attempts=attempts, in_round=first_round, round_index=0,
            prior=prior if (passes, attempts) == (0, 0) and prior is not None else stats.JEFFREYS_PRIOR,
        )  # fmt: skip
        rollouts += tasks * (first_round + ahead)
    return Expected(
        rollouts=rollouts,
        fewest=len(task_versions) * first_round,
        basis=_basis(
            tasks=len(task_versions),
            fresh=fresh,
            capped=capped,
            attempts=sum(a for _, a, _ in evidence.values()),
            model_name=probe_model.name,
            prior=prior,
        ),  # fmt: skip
    )


def _basis(*, tasks: int, fresh: int, capped: int, attempts: int, model_name: str, prior: stats.Beta | None) -> str:
    """What the expected rollouts came from, for the estimate's basis."""
    parts = []
    if tasks - fresh:
        parts.append(
            f"{tasks - fresh:,} task{'s' if tasks - fresh != 1 else ''} from their own {attempts:,} attempts by "
            f"{model_name}"
        )
    if fresh:
        drawn = (
            f"the environment's measured pass rates under {model_name} (a fitted Beta({prior.alpha:.2g}, "
            f"{prior.beta:.2g}) prior)"
            if prior is not None
            else "an unknown pass rate (Jeffreys prior: too few of the environment's tasks measured yet)"
        )
        parts.append(f"{fresh:,} with no attempts yet, their pass rates drawn from {drawn}")
    text = "the stopping rule's expected rollouts per task: " + "; ".join(parts)
    if capped:
        text += f"; {capped:,} in rarer states counted to the cap"
    return text
