"""python manage.py export_traces CAMPAIGN -o FILE [--file-type jsonl|parquet|atif] [--include-excluded]"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from calibration.models import Campaign
from engine import traces
from releases import traces as trace_exports


class Command(BaseCommand):
    help = (
        "Write a campaign's rollouts as training traces: token ids as sampled, loss mask, logprobs, policy "
        "version and reward (JSONL, Parquet, or ATIF trajectories as JSON lines)."
    )

    def add_arguments(self, parser):
        parser.add_argument("campaign", type=int)
        parser.add_argument("-o", "--output", required=True, type=Path)
        parser.add_argument(
            "--file-type", choices=traces.TRACE_FILE_TYPES, help="Default: from the file name (.parquet, else jsonl)."
        )
        parser.add_argument(
            "--include-excluded",
            action="store_true",
            help="Keep rollouts that cannot be trained on (text_only capture, no reward), marked trainable: false.",
        )

    def handle(self, *args, campaign, output, file_type, include_excluded, **options):
        found = Campaign.objects.select_related("probe_model").filter(pk=campaign).first()
        if found is None:
            raise CommandError(f"No campaign {campaign}.")
        file_type = file_type or ("parquet" if output.suffix == ".parquet" else "jsonl")
        count = trace_exports.campaign_traces_write(
            campaign=found, user=None, file_type=file_type, path=output, include_excluded=include_excluded
        )
        kept = "every rollout" if include_excluded else "trainable rollouts only"
        self.stderr.write(f"Wrote {count} traces of campaign {found.pk} ({kept}) as {file_type} to {output}.")
