"""Create the viewer and member groups (roles on Django permissions)."""

from django.db import migrations

VIEW = [
    ("evals", "view_evalset"),
    ("evals", "view_evalcase"),
    ("evals", "view_evalrun"),
    ("evals", "view_evalresult"),
    ("traces", "view_run"),
    ("traces", "view_event"),
    ("agents", "view_session"),
    ("agents", "view_message"),
]
MEMBER = [
    ("evals", "start_evalrun"),
    ("evals", "use_playground"),
    ("evals", "capture_case"),
]


def create_roles(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for config in apps.get_app_configs():
        config.models_module = True
        create_permissions(config, apps=apps, verbosity=0)
        config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")

    def perms(pairs):
        return [Permission.objects.get(content_type__app_label=app, codename=code) for app, code in pairs]

    viewer, _ = Group.objects.get_or_create(name="viewer")
    viewer.permissions.set(perms(VIEW))
    member, _ = Group.objects.get_or_create(name="member")
    member.permissions.set(perms(VIEW + MEMBER))


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0001_initial"),
        ("traces", "0001_initial"),
        ("agents", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
