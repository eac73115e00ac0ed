from django.core.management.base import BaseCommand, CommandError

from accounts.errors import ServiceError
from calibration import services
from calibration.models import Campaign


class Command(BaseCommand):
    help = (
        "Cancel a running or paused campaign, as the campaign page's Cancel button does: its queued work is "
        "dropped, rollouts already stored stay, and tasks not yet probed keep the calibration they had."
    )

    def add_arguments(self, parser):
        parser.add_argument("campaign_id", type=int, help="The campaign's number (#12 on its page: 12).")

    def handle(self, *args, campaign_id: int, **options):
        campaign = Campaign.objects.filter(pk=campaign_id).first()
        if campaign is None:
            raise CommandError(f"No campaign #{campaign_id}.")
        try:
            campaign = services.campaign_set_status(campaign=campaign, status=Campaign.Status.CANCELLED)
        except ServiceError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(self.style.SUCCESS(f"Campaign #{campaign.pk} cancelled."))
