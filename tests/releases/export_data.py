"""Test data for exports and releases: an environment of approved tasks, some calibrated."""

from calibration.models import Calibration, ProbeModel
from curation.models import Task, TaskStatus
from tests.factories import import_tasks, math_task

TOOL = {
    "type": "function",
    "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}},
}


def calibrated_environment(environment, owner) -> ProbeModel:
    """Four approved tasks of varied shape; three calibrated under probe model `probe` (in band, in band, retire)."""
    import_tasks(
        environment,
        owner,
        math_task("sum", question="What is 2 + 3?", answer="5"),
        math_task(
            "product",
            question="What is 91 * 17?",
            answer="1547",
            metadata={"source": "textbook", "page": 3},
            difficulty="medium",
        ),
        {
            "key": "capital",
            "prompt": [
                {"role": "system", "content": "Answer in one word."},
                {"role": "user", "content": "Capital of France?"},
            ],
            "answer": "Paris",
            "verifier": {"kind": "exact", "ignore_case": True},
        },
        {
            "key": "tool-add",
            "prompt": "Add 2 and 2 with the tool.",
            "answer": "4",
            "verifier": {"kind": "numeric", "abs_tol": 0.5},
            "tools": [TOOL],
        },
    )
    Task.objects.filter(environment=environment).update(status=TaskStatus.APPROVED)
    model = ProbeModel.objects.create(name="probe", backend="transformers", model="tiny")
    for key, successes, band in (("sum", 3, "in_band"), ("product", 2, "in_band"), ("capital", 8, "retire")):
        Calibration.objects.create(
            task_version=environment.tasks.get(key=key).current_version,
            probe_model=model,
            attempts=8,
            successes=successes,
            pass_rate=successes / 8,
            interval_low=0.1,
            interval_high=0.9,
            band=band,
            grpo_signal=0.5,
            decided=True,
        )
    return model


def predicted_calibration(environment, model, key: str) -> Calibration:
    """Task `key`'s band under `model` predicted for a checkpoint (in band, 0.97 probable): no rollouts."""
    return Calibration.objects.create(
        task_version=environment.tasks.get(key=key).current_version,
        probe_model=model,
        attempts=0,
        pass_rate=0.3,
        band="in_band",
        decided=True,
        predicted_probability=0.97,
        policy={"kind": "predicted", "method": "item_response"},
    )


def release_built_by_worker(environment, owner, releaser, *, var_dir, **filters):
    """A release of calibrated_environment(environment, owner) made by `releaser` with `filters`, built by a
    real Celery worker whose files live under `var_dir` (the caller points MEDIA_ROOT at var_dir / "media")."""
    from releases import services as releases
    from releases.models import Release, ReleaseStatus
    from tests.support.workers import flush_broker, running_worker, wait_for

    flush_broker()
    model = calibrated_environment(environment, owner)
    release = releases.release_create(user=releaser, probe_model=model, environment=environment, **filters)
    with running_worker(queues="default", extra_env={"PASSBAND_VAR_DIR": str(var_dir)}):
        wait_for(
            lambda: Release.objects.get(pk=release.pk).status == ReleaseStatus.READY,
            timeout=120,
            what="the worker to build the release",
        )
    return Release.objects.get(pk=release.pk)
