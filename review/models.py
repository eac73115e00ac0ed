"""Records of review: decisions on task versions, blind and double reviews, adjudication, claims on the
queue, reviewers' domains, and notifications. Their tables keep curation's names (`db_table`; see
docs/architecture.md, "The review app")."""

from django.conf import settings
from django.db import models

from curation.models import Comment, Task, TaskVersion


class Review(models.Model):
    """A reviewer's decision on one task version: approve, reject or send back, with a comment."""

    class Decision(models.TextChoices):
        APPROVE = "approve"
        REJECT = "reject"
        SEND_BACK = "send_back"
        FIX = "fix"  # the reviewer corrected the task: a new version (review.services.review_fix)

    class Defect(models.TextChoices):
        """What was wrong with a rejected or fixed task."""

        WRONG_ANSWER = "wrong_answer"
        AMBIGUOUS_PROMPT = "ambiguous_prompt"
        GAMEABLE_VERIFIER = "gameable_verifier"
        DUPLICATE = "duplicate"
        LEAKED_BENCHMARK = "leaked_benchmark"
        OTHER = "other"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="reviews")
    task_version = models.ForeignKey(TaskVersion, on_delete=models.PROTECT, null=True, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="reviews")
    decision = models.CharField(max_length=20, choices=Decision.choices)
    # Every reject and fix names its defect; approvals and send-backs have none.
    defect = models.CharField(max_length=30, choices=Defect.choices, blank=True)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "curation_review"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["reviewer", "created_at"])]

    def __str__(self) -> str:
        return f"{self.decision} {self.task} by {self.reviewer}"


class BlindItem(models.Model):
    """Something people judge without seeing the decision already made on it.

    Now: a rollout an LLM judge scored, sampled for reviewers (calibration/services/judge_samples.py,
    docs/verifiers.md "Judges checked against people"). The record is general: whose decision is
    checked (`decided_by`, `decided_version`) and that decision, what people see (`content` beside
    the task version's prompt), how many independent reviews it wants. Its reviews are BlindReview.
    """

    class Kind(models.TextChoices):
        JUDGED_ROLLOUT = "judged_rollout"
        # A task version a first reviewer decided (decided_by, decision pass = approve, fail = reject),
        # waiting for a second reviewer's independent verdict (review.double_review).
        DOUBLE_REVIEW = "double_review"
        # A task version whose decision a lead knows, mixed into the same queue to measure reviewers.
        GOLD_TASK = "gold_task"

    kind = models.CharField(max_length=40, choices=Kind.choices)
    # The item's own record: for judged_rollout a calibration.Rollout id. A number, not a foreign key:
    # review sits below calibration, and the item keeps what people review in `content`.
    object_id = models.PositiveBigIntegerField()
    task_version = models.ForeignKey(TaskVersion, on_delete=models.PROTECT, related_name="blind_items")
    content = models.TextField(help_text="What people judge: the completion, copied when sampled.")
    decided_by = models.CharField(max_length=80, help_text="Whose decision is checked: the judge's name.")
    decided_version = models.CharField(max_length=40, blank=True, help_text="The judge's prompt version.")
    # The decision checked (the judge's pass or fail): never shown to anyone reviewing the item.
    decision = models.CharField(max_length=20)
    # Why the decider decided so (a first reviewer's comment): never shown while the item is reviewed.
    decided_note = models.TextField(blank=True)
    decided_defect = models.CharField(max_length=30, blank=True, help_text="A first reviewer's defect tag.")
    reviews_wanted = models.PositiveSmallIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "curation_blinditem"
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["kind", "object_id"], name="blind_item_unique_object")]
        indexes = [models.Index(fields=["kind", "decided_by", "decided_version"], name="blind_item_decider")]

    def __str__(self) -> str:
        return f"blind item {self.pk} ({self.kind} {self.object_id})"


class BlindReview(models.Model):
    """One person's verdict on a blind item, given without seeing its decision or anyone else's review."""

    class Verdict(models.TextChoices):
        PASS = "pass"
        FAIL = "fail"

    item = models.ForeignKey(BlindItem, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="blind_reviews")
    verdict = models.CharField(max_length=20, choices=Verdict.choices)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "curation_blindreview"
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["item", "reviewer"], name="blind_review_once_per_reviewer")]

    def __str__(self) -> str:
        return f"{self.verdict} on {self.item} by {self.reviewer}"


class Adjudication(models.Model):
    """A lead's final decision on a double-reviewed task whose two reviewers disagreed."""

    item = models.OneToOneField(BlindItem, on_delete=models.CASCADE, related_name="adjudication")
    lead = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    decision = models.CharField(max_length=20, choices=BlindReview.Verdict.choices)
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "curation_adjudication"

    def __str__(self) -> str:
        return f"{self.decision} on {self.item} by {self.lead}"


class ReviewClaim(models.Model):
    """Who holds a task of the review queue, until when. While it lasts no other reviewer sees the
    task in their queue or decides it; once `expires_at` passes the claim counts for nothing
    (review.assignments)."""

    class How(models.TextChoices):
        CLAIMED = "claimed"
        ROUND_ROBIN = "round_robin"
        DOMAIN = "domain"
        REASSIGNED = "reassigned"

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="review_claim")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="review_claims")
    how = models.CharField(max_length=20, choices=How.choices, default=How.CLAIMED)
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "curation_reviewclaim"
        indexes = [models.Index(fields=["reviewer", "expires_at"], name="review_claim_holder")]

    def __str__(self) -> str:
        return f"{self.task} held by {self.reviewer} until {self.expires_at:%Y-%m-%d %H:%M}"


class ReviewerDomain(models.Model):
    """A domain (math, code, ...) a reviewer takes when a lead assigns the queue by domain."""

    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="review_domains")
    domain = models.CharField(max_length=40)

    class Meta:
        db_table = "curation_reviewerdomain"
        ordering = ["domain", "reviewer"]
        constraints = [models.UniqueConstraint(fields=["reviewer", "domain"], name="reviewer_domain_once")]

    def __str__(self) -> str:
        return f"{self.reviewer} reviews {self.domain}"


class Notification(models.Model):
    """Something in the app for one person to read: now, that someone mentioned them in a comment."""

    class Kind(models.TextChoices):
        MENTION = "mention"

    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.MENTION)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="+")
    comment = models.ForeignKey(Comment, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    read_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "curation_notification"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["recipient", "read_at"], name="notification_unread")]
        constraints = [
            models.UniqueConstraint(fields=["recipient", "comment", "kind"], name="notification_once_per_comment")
        ]

    def __str__(self) -> str:
        return f"{self.kind} of {self.recipient} by {self.actor} on {self.task}"
