"""What every API list shares: token authentication in the schema, id ordering, lookup filters, and
pages shared for a few seconds between callers who would see the same rows."""

import hashlib
import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpResponse
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import generics, serializers
from rest_framework.renderers import JSONRenderer

from accounts.permissions import group_names


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """Describes `Authorization: Bearer pb_...` in the OpenAPI schema (registered on import)."""

    target_class = "accounts.authentication.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A Passband API token with the needed scope."}


class IdOrderedList(generics.ListAPIView):
    """A list with cursor pagination, which needs one stable ordering field: the id."""

    ordering = "pk"

    def paginate_queryset(self, queryset):
        self.paginator.ordering = self.ordering
        return super().paginate_queryset(queryset.order_by(self.ordering))


class LookupFilteredList(IdOrderedList):
    """A list whose query parameters (checked by `filters_class`) map one to one onto field lookups."""

    filters_class: type[serializers.Serializer]
    lookups: dict[str, str]

    def base_queryset(self):
        raise NotImplementedError

    def get_queryset(self):
        parsed = self.filters_class(data=self.request.query_params)
        parsed.is_valid(raise_exception=True)
        queryset = self.base_queryset()
        for name, lookup in self.lookups.items():
            if parsed.validated_data.get(name):
                queryset = queryset.filter(**{lookup: parsed.validated_data[name]})
        return queryset


class SharedPages:
    """A list whose pages are kept for `PASSBAND_API_PAGE_SECONDS` (0, the default: not kept) and served
    again to the same user, with the same roles, asking for the same URL: the many data loaders of one
    training job that read the same pages at once cost one query between them.

    A kept page says how stale it may be: `Age` (seconds since it was read from the database) and
    `Cache-Control: private, max-age=<seconds>`. A request with `Cache-Control: no-cache` reads the
    database and keeps the fresh page. Authentication, token scopes and rate limits run on every request
    before this; only 200 pages are kept."""

    def list(self, request, *args, **kwargs):
        seconds = settings.PASSBAND_API_PAGE_SECONDS
        if not seconds:
            return super().list(request, *args, **kwargs)
        user = request.user
        identity = "|".join(
            [str(user.pk), str(user.is_staff), ",".join(sorted(group_names(user))), request.scheme, request.get_host()]
            + [request.get_full_path()]  # the page's `next` link is absolute: scheme and host belong to the key
        )
        key = "api-page:" + hashlib.sha256(identity.encode()).hexdigest()
        kept = None if "no-cache" in request.headers.get("Cache-Control", "") else cache.get(key)
        if kept is None:
            response = super().list(request, *args, **kwargs)
            kept = (time.time(), JSONRenderer().render(response.data, renderer_context=self.get_renderer_context()))
            cache.set(key, kept, seconds)
        read_at, body = kept
        page = HttpResponse(body, content_type="application/json")
        page["Age"] = str(max(0, int(time.time() - read_at)))
        page["Cache-Control"] = f"private, max-age={seconds}"
        return page
