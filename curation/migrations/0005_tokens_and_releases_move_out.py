"""ApiToken moves to accounts, Release and ReleaseItem to releases: the tables stay, the state moves."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("curation", "0004_release"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterModelTable(name="apitoken", table="curation_apitoken"),
                migrations.AlterModelTable(name="release", table="curation_release"),
                migrations.AlterModelTable(name="releaseitem", table="curation_releaseitem"),
                migrations.DeleteModel(name="ApiToken"),
                migrations.DeleteModel(name="ReleaseItem"),
                migrations.DeleteModel(name="Release"),
            ],
            database_operations=[],
        ),
    ]
