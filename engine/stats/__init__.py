"""Pass-rate statistics: intervals, bands, the adaptive stopping rule and population priors."""

from engine.stats.core import *  # noqa: F401,F403
