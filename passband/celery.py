import os

from celery import Celery
from celery.signals import worker_init

from passband import broker  # noqa: F401  (registers the embedded default's transport with kombu)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "passband.settings")

app = Celery("passband")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _yield_the_cpu(**kwargs):
    """PASSBAND_WORKER_NICE (0: off): the worker and its pool processes run at that niceness, so on a machine it
    shares with the web app the pages are served first and the campaign takes what is left."""
    niceness = int(os.environ.get("PASSBAND_WORKER_NICE", "0") or 0)
    if niceness > 0:
        os.nice(niceness)


@worker_init.connect
def _read_plugin_declarations(**kwargs):
    """Read the installed plug-ins' declarations in the worker's main process, before its pool forks: every pool
    process inherits them instead of starting helpers of its own (engine/declarations.py)."""
    from engine import declarations

    declarations.read_installed()
