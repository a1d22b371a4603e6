"""Playground sessions: a conversation with a target, each turn a traced ``Run``."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from apps.traces.fields import OutputJSONField, RedactedCharField, StorableTextField


class InputMode(models.TextChoices):
    CONVERSATION = "conversation", "conversation: the whole chat as [{role, content}] messages"
    TEXT = "text", "text: the message as a string"
    JSON = "json", "JSON: the message parsed as a JSON value"


class Session(models.Model):
    target_id = models.CharField(max_length=200)
    # what the target receives each turn: agents take the conversation, most pipeline steps a
    # question string or a JSON object (the shape of their eval set's inputs)
    input_mode = models.CharField(max_length=16, choices=InputMode.choices, default=InputMode.CONVERSATION)
    variant = models.CharField(max_length=200, blank=True, default="")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    title = RedactedCharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"session {self.pk} with {self.target_id}"


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", "user"
        ASSISTANT = "assistant", "assistant"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = StorableTextField()  # as typed / as the target answered: never redacted (an error is, in services)
    run = models.ForeignKey("traces.Run", null=True, blank=True, on_delete=models.SET_NULL)
    tool_calls = OutputJSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "id"]
