"""Playground turns stored before runs had an owner become private to their session's user."""

from django.db import migrations


def mark_private(apps, schema_editor):
    Session = apps.get_model("agents", "Session")
    Message = apps.get_model("agents", "Message")
    Run = apps.get_model("traces", "Run")
    for session in Session.objects.all().only("pk", "user_id").iterator():
        run_ids = Message.objects.filter(session=session, run__isnull=False).values("run_id")
        Run.objects.filter(pk__in=run_ids).update(private=True, owner_id=session.user_id)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0002_session_input_mode"),
        ("traces", "0002_run_private"),
    ]

    operations = [migrations.RunPython(mark_private, migrations.RunPython.noop)]
