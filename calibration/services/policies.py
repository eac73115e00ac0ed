"""Sampling policies and thresholds as calibration stores them: an environment's band thresholds, a
campaign's stored policy, and the stopping rule's policy for a stored one."""

from __future__ import annotations

from calibration.models import Campaign, Outcome
from curation.models import Environment
from engine import stats

# The outcomes that are evidence of a pass rate: errors of the verifier, the server or the world are not.
EVIDENCE = (Outcome.PASS, Outcome.FAIL)


def thresholds_for(environment: Environment) -> stats.Thresholds:
    """The environment's floor and retirement threshold, with the default indifference zones."""
    return stats.Thresholds.with_default_zones(floor=environment.floor, retire_at=environment.retire_at)


def policy_for(campaign: Campaign) -> dict:
    """The sampling policy of a campaign, as stored on the calibrations it produces."""
    return {
        "kind": campaign.policy,
        "round_size": campaign.round_size,
        "max_rollouts": campaign.max_rollouts,
        "confidence": campaign.confidence,
    }


def sampling_policy(policy: dict, *, attempts: int) -> stats.SamplingPolicy:
    """The stopping rule's policy for a stored campaign policy (see policy_for) after `attempts`."""
    if policy.get("kind") == Campaign.Policy.ADAPTIVE:
        cap = max(policy["max_rollouts"], policy["round_size"])
        return stats.SamplingPolicy(
            kind="adaptive", round_size=policy["round_size"], cap=cap, confidence=policy.get("confidence", 0.95)
        )
    # Fixed N: the attempts there are (errors are not attempts, so a fixed-N campaign may end with
    # fewer than N), banded only where the stopping rule's claims hold on them; else undecided.
    return stats.SamplingPolicy(kind="fixed", fixed_n=max(1, attempts), confidence=policy.get("confidence", 0.95))


# The stored policy of a band predicted for a checkpoint (calibration/services/checkpoints.py).
PREDICTED_POLICY = "predicted"
