"""What every API list shares: token authentication in the schema, id ordering, lookup filters."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import generics, serializers


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
