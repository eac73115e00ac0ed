"""Passband's engine: everything a trainer can import without Django.

stats (pass-rate intervals, bands and the stopping rule), verifiers (score a completion),
sandbox (run model-written code in a separate, limited process), episodes (multi-turn tool
use), backends (generate rollouts), task_format (parse and validate task files), formats
(export rows for trainers) and packing (compact token and logprob arrays).
"""
