"""Check a campaign's captured tokens against its llama.cpp server: every rollout's stored completion
ids, detokenised by the server itself, read as the stored text, with one logprob per id."""

from django.core.management.base import BaseCommand, CommandError

from calibration.models import Campaign, Outcome, Rollout
from engine import outbound
from engine.packing import unpack_logprobs, unpack_tokens


class Command(BaseCommand):
    help = "Check that every rollout's stored token ids detokenise, on the campaign's llama.cpp server, to its text."

    def add_arguments(self, parser):
        parser.add_argument("campaign", type=int)

    def handle(self, *args, campaign: int, **options):
        try:
            found = Campaign.objects.select_related("probe_model").get(pk=campaign)
        except Campaign.DoesNotExist:
            raise CommandError(f"No campaign {campaign}.") from None
        probe_model = found.probe_model
        if probe_model.backend != "openai" or probe_model.server != "llama.cpp":
            raise CommandError(
                "capture_check needs a campaign probed through a llama.cpp server (it detokenises there)."
            )
        root = probe_model.base_url.rstrip("/").removesuffix("/v1")
        # The probe model's staff-set URL: through the outbound policy, like sampling from it.
        with outbound.http_client(timeout_s=60) as client:
            end_token = client.get(f"{root}/props").json().get("eos_token") or ""
            checked, problems = 0, []
            rollouts = Rollout.objects.filter(campaign=found).exclude(
                outcome__in=[Outcome.GENERATION_ERROR, Outcome.PROMPT_TOO_LONG]
            )
            for rollout in rollouts.iterator(chunk_size=500):
                ids = unpack_tokens(rollout.completion_token_ids)
                logprobs = unpack_logprobs(rollout.logprobs)
                where = f"rollout {rollout.pk} (task version {rollout.task_version_id}, sample {rollout.sample_index})"
                if ids is None:
                    problems.append(f"{where}: no token ids (capture {rollout.capture or 'unset'})")
                    continue
                text = client.post(f"{root}/detokenize", json={"tokens": ids}).json()["content"]
                if end_token and text.endswith(end_token):
                    text = text[: -len(end_token)]
                if text != rollout.text:
                    problems.append(f"{where}: ids read {text[:80]!r}, stored text {rollout.text[:80]!r}")
                elif logprobs is None or len(logprobs) != len(ids):
                    problems.append(f"{where}: {len(ids)} ids, {len(logprobs or [])} logprobs")
                checked += 1
        for problem in problems[:50]:
            self.stderr.write(problem)
        if problems:
            raise CommandError(f"{len(problems)} of {checked} rollouts do not match their server's tokens.")
        self.stdout.write(
            self.style.SUCCESS(f"All {checked} rollouts: ids detokenise to the stored text, one logprob each.")
        )
