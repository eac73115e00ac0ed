from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.contrib.auth import get_user_model
        from django.db.models.signals import m2m_changed

        from accounts.permissions import forget_group_names

        def groups_changed(sender, instance, action, **kwargs):
            # user.groups.add/remove/clear: that user object reads its groups again. Changes made from the
            # group's side (group.user_set.add) reach other user objects at their next request.
            if action.startswith("post_") and isinstance(instance, get_user_model()):
                forget_group_names(instance)

        m2m_changed.connect(groups_changed, sender=get_user_model().groups.through, weak=False)
