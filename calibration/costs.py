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
    "Expected",
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
    """What a probe model's stored rollouts say, measured on this deployment: how many, their mean spend,
    the pace of its latest campaign (`seconds_per_rollout`, its model loading left out; None when
    unknown), and per request its output tokens per second, its mean latency, and how many ran at once
    (latency over pace)."""

    rollouts: int
    mean_cost_usd: Decimal
    seconds_per_rollout: float | None
    tokens_per_second: float | None = None
    request_seconds: float | None = None


@dataclass(frozen=True)
class Estimate:
    """A probe's expected rollouts, cost and time. `measured`: from this model's own rollouts here; else
    from prices and an assumed speed, with `cost_range` and `seconds_range` (loading included) stated.
    `rollouts` is the most the probe may store; `expected_rollouts` what the figures count (fewer for an
    adaptive probe, which stops early: `rollouts_basis` says from what)."""

    rollouts: int
    cost_usd: float
    seconds: float | None
    basis: str
    measured: bool = False
    cost_range: tuple[float, float] | None = None
    seconds_range: tuple[float, float] | None = None
    expected_rollouts: float | None = None
    rollouts_basis: str = ""

    def as_dict(self) -> dict:
        return {
            "rollouts": self.rollouts,
            "expected_rollouts": self.rollouts if self.expected_rollouts is None else self.expected_rollouts,
            "rollouts_basis": self.rollouts_basis,
            "cost_usd": self.cost_usd,
            "seconds": self.seconds,
            "basis": self.basis,
            "measured": self.measured,
            "cost_range": self.cost_range,
            "seconds_range": self.seconds_range,
        }


@dataclass(frozen=True)
class Expected:
    """An adaptive probe's expected rollouts (all tasks), the fewest it may store, and what the expectation
    came from (a sentence)."""

    rollouts: float
    fewest: int
    basis: str


# With no rollouts of a model: answers use between an eighth of the budget and all of it, generated
# between half and four times the assumed speed, and an in-process model may first take up to
# `load_seconds` to load. How often the range holds the actual figures is not measured yet (docs/calibration.md).
SHORTEST_SHARE_OF_BUDGET = 8
SPEED_SPREAD = (0.5, 4.0)


def probe_estimate(
    *,
    model_name: str,
    price: Price,
    rollouts: int,
    max_new_tokens: int,
    history: History | None,
    assumed_tokens_per_second: float,
    load_seconds: float = 0.0,
    expected: Expected | None = None,
) -> Estimate:
    """What a probe of at most `rollouts` rollouts should cost and take: all of them, or for an adaptive
    probe, which stops early, the `expected` rollouts (the range then runs from its fewest to `rollouts`).

    With `history` (the model has rollouts here): its mean spend per rollout and its latest campaign's
    pace, and the basis names the measured speed, latency and concurrency. Without: the point figure is
    every rollout spending its whole `max_new_tokens` budget at `assumed_tokens_per_second` (token
    prices, and device time for a model priced by the GPU-hour), and a range around it (answers from an
    eighth of the budget to all of it, speeds from half to four times the assumed one, plus up to
    `load_seconds` of loading, which is not billed); the basis says there is no measured speed yet.
    """
    count = float(rollouts) if expected is None else expected.rollouts
    rollouts_basis = "" if expected is None else expected.basis
    suffix = "" if expected is None else f"; {count:,.0f} of at most {rollouts:,} rollouts, from {expected.basis}"
    if history is not None and history.rollouts:
        cost = history.mean_cost_usd * Decimal(str(count))
        seconds = None if history.seconds_per_rollout is None else history.seconds_per_rollout * count
        basis = f"the mean of {history.rollouts:,} stored rollouts of {model_name}"
        if seconds is not None:
            basis += ", at the pace of its latest campaign"
            if history.tokens_per_second and history.request_seconds:
                at_once = history.request_seconds / history.seconds_per_rollout
                basis += (
                    f" (measured on this deployment: {history.tokens_per_second:.0f} output tokens per second per"
                    f" request, {history.request_seconds:.2f} s per request, about {at_once:.1f} at once)"
                )
        return Estimate(
            rollouts=rollouts, cost_usd=float(cost), seconds=seconds, basis=basis + suffix, measured=True,
            expected_rollouts=count, rollouts_basis=rollouts_basis,
        )  # fmt: skip

    def figures(tokens: float, speed: float, count: float) -> tuple[float, float]:
        seconds_each = tokens / speed
        each = rollout_cost(
            price=price, device_ms=seconds_each * 1000, input_tokens=ASSUMED_PROMPT_TOKENS, output_tokens=int(tokens)
        )
        return float(each) * count, seconds_each * count

    cost, seconds = figures(max_new_tokens, assumed_tokens_per_second, count)
    low_cost, low_seconds = figures(
        max(max_new_tokens / SHORTEST_SHARE_OF_BUDGET, 1),
        assumed_tokens_per_second * SPEED_SPREAD[1],
        rollouts if expected is None else expected.fewest,
    )
    high_cost, high_seconds = figures(max_new_tokens, assumed_tokens_per_second * SPEED_SPREAD[0], rollouts)
    basis = (
        f"no measured speed for {model_name} yet (no rollouts of it): its prices, every rollout using its "
        f"{max_new_tokens}-token budget, generated at an assumed {assumed_tokens_per_second:g} tokens per second; "
        f"the range takes answers of an eighth of the budget to all of it at {SPEED_SPREAD[0]:g}× to "
        f"{SPEED_SPREAD[1]:g}× that speed"
        + (f", and up to {load_seconds:.0f} s to load the model first (not billed)" if load_seconds else "")
        + (f"; {count:,.0f} of at most {rollouts:,} rollouts (the range: from every task stopped after its first "
           f"round to every task at the cap), from {expected.basis}" if expected is not None else "")
    )  # fmt: skip
    return Estimate(
        rollouts=rollouts,
        cost_usd=cost,
        seconds=seconds,
        basis=basis,
        cost_range=(low_cost, high_cost),
        seconds_range=(low_seconds, high_seconds + load_seconds),
        expected_rollouts=count,
        rollouts_basis=rollouts_basis,
    )
