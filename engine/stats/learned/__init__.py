"""A stopping table learned from an environment's own probes, guarded so that a wrong fit stays safe.

The modules, each importable on its own; ``from engine.stats.learned import X`` reaches every
public name, as ``stats.X`` does:

* ``population``: the nonparametric fit of the environment's pass rates, bootstrap resamples, and
  the populations the evidence allows (``plausible_region``, ``most_damaging``).
* ``performance``: a table's exact rollouts and errors on a population (``table_performance``),
  the error slices, and the harm check against the plausible populations.
* ``search``: the guard (``guarded_table``), the Bayes-optimal table at given error prices
  (``priced_table``) and the Lagrangian price search (``search_prices``).
* ``table``: ``learned_table`` and ``learned_table_from_evidence``, what the service calls.

The method, why each step keeps the promise, and its figures: docs/prediction.md.
"""

from engine.stats.learned.performance import (
    Performance,
    error_slices,
    mixed_performance,
    table_performance,
    worst_performance,
)
from engine.stats.learned.population import (
    PLAUSIBLE_NATS,
    PlausibleRegion,
    Population,
    fit_population,
    most_damaging,
    most_damaging_together,
    plausible_region,
    population_resamples,
    population_support,
)
from engine.stats.learned.search import (
    GUARD_EDGE_ERRORS,
    PriceSearch,
    guarded_table,
    priced_table,
    search_prices,
)
from engine.stats.learned.table import (
    MIN_TASKS,
    LearnedTable,
    follows_cheaper,
    learned_table,
    learned_table_from_evidence,
)

__all__ = [
    "error_slices",
    "fit_population",
    "follows_cheaper",
    "GUARD_EDGE_ERRORS",
    "guarded_table",
    "learned_table",
    "learned_table_from_evidence",
    "LearnedTable",
    "MIN_TASKS",
    "mixed_performance",
    "most_damaging",
    "most_damaging_together",
    "Performance",
    "PLAUSIBLE_NATS",
    "plausible_region",
    "PlausibleRegion",
    "Population",
    "population_resamples",
    "population_support",
    "priced_table",
    "PriceSearch",
    "search_prices",
    "table_performance",
    "worst_performance",
]
