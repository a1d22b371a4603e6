"""Roles for human reviews: viewers read reviews, members also write their own."""

from django.db import migrations

VIEW = [("evals", "view_review"), ("evals", "view_reviewrevision")]
MEMBER = [("evals", "review_result")]


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for config in apps.get_app_configs():
        config.models_module = True
        create_permissions(config, apps=apps, verbosity=0)
        config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")

    def perms(pairs):
        return [Permission.objects.get(content_type__app_label=app, codename=code) for app, code in pairs]

    for group in Group.objects.filter(name="viewer"):
        group.permissions.add(*perms(VIEW))
    for group in Group.objects.filter(name="member"):
        group.permissions.add(*perms(VIEW + MEMBER))


class Migration(migrations.Migration):
    dependencies = [("evals", "0010_reviews"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
