"""The review app's seams with curation: the values curation's policy names without importing review."""

from curation import policy
from review.models import BlindItem


def test_the_policy_names_the_double_review_kind_by_its_value():
    assert policy.DECIDED_BY_A_PERSON == (BlindItem.Kind.DOUBLE_REVIEW,)


def test_the_policy_rules_for_blind_items_are_keyed_by_review_s_model():
    kinds = {kind for kind, _ in policy.RULES}
    assert BlindItem._meta.model_name in kinds
    assert (BlindItem._meta.app_label, BlindItem._meta.db_table) == ("review", "curation_blinditem")
