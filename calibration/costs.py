"""What probing costs, defined once: every page, the API and the workers use these functions.

Pure functions of prices and counts (no queries), so a test can recompute any figure a page shows
from the rollouts it came from.

- A rollout's spend is its share of device time at the model's GPU-hour price (times its GPUs),
  plus its own tokens at the token prices (`rollout_cost`).
- The samples of one batch share the device, so the batch's wall time is split among them in
  proportion to the tokens each one generated (`device_time_shares`): a long answer costs more than
  a short one, and the batch is paid once.
- Spend per task: authoring (every version) plus probing (every rollout). Spend per in-band task:
  the authoring of the tasks that were probed (a task never probed could not have come out in band)
  plus all probing, divided by the in-band tasks (`per_in_band_task`).
- An estimate before a probe (`probe_estimate`): with history, the mean spend of the model's
  stored rollouts and the pace of its latest campaign, from its start to its last verdict (rollouts
  of one job are written at one instant, so their own timestamps say nothing about speed). With
  none, the token prices and the GPU-hour price of every rollout spending its whole budget at an
  assumed generation speed, stated with the figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

__all__ = [
    "ASSUMED_PROMPT_TOKENS",
    "Estimate",
    "History",
    "Price",
    "device_time_shares",
    "per_in_band_task",
    "per_task",
    "probe_estimate",
    "rollout_cost",
]

# Prompt tokens assumed per rollout when a model has no history (a short word problem).
ASSUMED_PROMPT_TOKENS = 200
CENTS_OF_A_MICRODOLLAR = Decimal("0.00000001")  # the precision Rollout.cost_usd stores


@dataclass(frozen=True)
class Price:
    """A probe model's prices: dollars per GPU-hour (times GPUs), per million input and output tokens."""

    usd_per_gpu_hour: Decimal = Decimal(0)
    gpus: int = 1
    usd_per_million_input_tokens: Decimal = Decimal(0)
    usd_per_million_output_tokens: Decimal = Decimal(0)

    @classmethod
    def of(cls, probe_model) -> Price:
        """The price of a ProbeModel (or anything with the same four fields)."""
        return cls(
            usd_per_gpu_hour=Decimal(probe_model.usd_per_gpu_hour or 0),
            gpus=int(probe_model.gpus or 1),
            usd_per_million_input_tokens=Decimal(probe_model.usd_per_million_input_tokens or 0),
            usd_per_million_output_tokens=Decimal(probe_model.usd_per_million_output_tokens or 0),
        )

    @property
    def by_time(self) -> bool:
        return self.usd_per_gpu_hour > 0


def rollout_cost(
    *, price: Price, device_ms: float | None, input_tokens: int | None, output_tokens: int | None
) -> Decimal:
    """Dollars for one rollout: its device time at the GPU-hour price, plus its tokens at the token prices."""
    cost = Decimal(0)
    if price.by_time and device_ms:
        cost += Decimal(str(device_ms)) / Decimal(3_600_000) * price.usd_per_gpu_hour * price.gpus
    if input_tokens:
        cost += Decimal(input_tokens) * price.usd_per_million_input_tokens / Decimal(1_000_000)
    if output_tokens:
        cost += Decimal(output_tokens) * price.usd_per_million_output_tokens / Decimal(1_000_000)
    return cost.quantize(CENTS_OF_A_MICRODOLLAR)


def device_time_shares(*, seconds: float, output_tokens: Sequence[int | None]) -> list[float]:
    """Split a batch's wall time (seconds) among its samples by the tokens each generated, in ms.

    Each sample weighs 1 + its output tokens (the 1: its share of reading the prompt; a sample
    with no count, or a failed one, weighs 1). The shares add up to the batch's time.
    """
    weights = [1 + max(int(tokens or 0), 0) for tokens in output_tokens]
    total = sum(weights)
    return [seconds * 1000 * weight / total for weight in weights] if total else []


def per_task(total_usd: float, tasks: int) -> float | None:
    """Spend per task, or None without tasks."""
    return total_usd / tasks if tasks else None


def per_in_band_task(*, probed_authoring_usd: float, probing_usd: float, in_band_tasks: int) -> float | None:
    """What one in-band task cost: authoring of the probed tasks plus all probing, over the in-band
    tasks (None without any). Tasks never probed are left out: they had no chance to be in band."""
    return (probed_authoring_usd + probing_usd) / in_band_tasks if in_band_tasks else None


@dataclass(frozen=True)
class History:
    """What a probe model's stored rollouts say: how many, their mean spend, and the pace of its latest
    campaign (`seconds_per_rollout`, None when unknown)."""

    rollouts: int
    mean_cost_usd: Decimal
    seconds_per_rollout: float | None


@dataclass(frozen=True)
class Estimate:
    rollouts: int
    cost_usd: float
    seconds: float | None
    basis: str

    def as_dict(self) -> dict:
        return {"rollouts": self.rollouts, "cost_usd": self.cost_usd, "seconds": self.seconds, "basis": self.basis}


def probe_estimate(
    *,
    model_name: str,
    price: Price,
    rollouts: int,
    max_new_tokens: int,
    history: History | None,
    assumed_tokens_per_second: float,
) -> Estimate:
    """What `rollouts` rollouts should cost and take (an upper bound for an adaptive probe, which stops early).

    With `history` (the model has rollouts): its mean spend per rollout, and its latest campaign's
    pace. Without: every rollout spends its whole `max_new_tokens` budget, at the token prices and,
    for a model priced by the GPU-hour, at `assumed_tokens_per_second` of device time; the basis
    says so.
    """
    if history is not None and history.rollouts:
        cost = history.mean_cost_usd * rollouts
        seconds = None if history.seconds_per_rollout is None else history.seconds_per_rollout * rollouts
        basis = f"the mean of {history.rollouts:,} stored rollouts of {model_name}"
        if seconds is not None:
            basis += ", at the pace of its latest campaign"
        return Estimate(rollouts=rollouts, cost_usd=float(cost), seconds=seconds, basis=basis)
    seconds_each = max_new_tokens / assumed_tokens_per_second
    each = rollout_cost(
        price=price, device_ms=seconds_each * 1000, input_tokens=ASSUMED_PROMPT_TOKENS, output_tokens=max_new_tokens
    )
    basis = (
        f"the prices of {model_name} (no rollouts of it yet), every rollout using its {max_new_tokens}-token "
        f"budget, generated at an assumed {assumed_tokens_per_second:g} tokens per second"
    )
    return Estimate(rollouts=rollouts, cost_usd=float(each * rollouts), seconds=seconds_each * rollouts, basis=basis)
