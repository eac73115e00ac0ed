"""Pass-rate statistics for calibration: bands, intervals, the stopping rules, priors and the band rule.

A pure package (numpy and scipy only, never Django), so the calibration service, trainers and the
benchmark in ``bench/calibration/`` all run the very same code. ``from engine import stats`` and
``stats.X`` reach everything; the modules:

* ``bands``: ``Band``, ``Flag``, ``Thresholds`` (and ``check_thresholds``), ``band_for_rate``.
* ``posterior``: the Beta posterior, intervals (Jeffreys, Clopper-Pearson, Wilson), GRPO signal.
* ``sequential``: ``SamplingPolicy`` and the stopping rules as decision codes; ``rule``: ``assess``.
* ``tables``: stopping tables and exact operating characteristics (the OC curve).
* ``verdict``: ``calibration_verdict``, the whole band rule a stored calibration shows.
* ``priors``, ``ladder``, ``drift``: population prior, model ladder, discounted feedback.
* ``curriculum``: the next tasks for a trainer, by predicted learning signal.
* ``checkpoints``: the operating characteristic of re-profiling a new checkpoint behind the item-response prior.
* ``side``: side information (an item-response model, scores) and a learned table per stratum.
* ``agreement``: two raters of the same items: percent agreement, Cohen's kappa, false-pass rate.
* ``optimal``: the Bayes-optimal table for a known population (the benchmark's bound).
* ``learned``: a population fitted on an environment's own probes and the guarded table learned for it.
"""

from engine.stats.agreement import *
from engine.stats.bands import *
from engine.stats.checkpoints import *
from engine.stats.curriculum import *
from engine.stats.drift import *
from engine.stats.ladder import *
from engine.stats.learned import *
from engine.stats.optimal import *
from engine.stats.posterior import *
from engine.stats.priors import *
from engine.stats.rule import *
from engine.stats.sequential import *
from engine.stats.side import *
from engine.stats.tables import *
from engine.stats.verdict import *
