"""The parts of passband.settings, one per concern; passband.settings (the DJANGO_SETTINGS_MODULE) takes
every upper-case name of each.

- env: paths and the readers of environment variables (yes/no, numbers, lists)
- calibration: band thresholds, calibration and campaign knobs, similarity, feedback, judge samples, estimates
- outside: connections that leave the server (outbound policy, LLM judges, MCP), sign-in (OIDC), metrics
- celery: the broker, task routing and limits, beat's schedule
"""
