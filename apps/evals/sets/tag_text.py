"""A case's tags as comma-separated text (``math, hard``): the one parser and the one form field
the capture page, the admin's case form and its add/remove-tags actions share.

Tags are stored as a JSON list of non-empty strings (the loaders refuse anything else:
``evalcore.loaders``); as text they are the tags joined with ``", "``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

TAGS_MAX_CHARS = 500
"""The longest tags text a form takes (all tags with their separators)."""


class TagTextError(ValueError):
    """Tags text that cannot be stored: the message names the field and the tag."""


def parse_tag_text(text: str | None, *, field: str = "tags") -> list[str]:
    """The tags of comma-separated ``text``: each stripped, blanks dropped, repeats kept once in
    first-seen order (``" a, b,,a "`` → ``["a", "b"]``); ``None`` or blank text → ``[]``. Text
    that is a JSON list of strings (``["a", "b"]``, how the admin showed tags before) is read as
    that list, so a pasted or scripted old value keeps meaning what it meant.

    Raises:
        TagTextError: the text is longer than :data:`TAGS_MAX_CHARS`, or a tag holds a NUL
            character (U+0000, no database stores it) or a line break (a tag is one line);
            the message names ``field`` and the tag's position (1-based).
    """
    text = text or ""
    if len(text) > TAGS_MAX_CHARS:
        raise TagTextError(f"{field}: at most {TAGS_MAX_CHARS} characters of tags (got {len(text)})")
    pieces = _json_list(text)
    tags: list[str] = []
    for position, raw in enumerate(text.split(",") if pieces is None else pieces, start=1):
        tag = raw.strip()
        if not tag:
            continue
        if "\x00" in tag:
            raise TagTextError(
                f"{field}: Null characters are not allowed (a NUL character, U+0000, in tag {position})."
            )
        if "\n" in tag or "\r" in tag:
            raise TagTextError(f"{field}: tag {position} ({tag.splitlines()[0]!r}…) spans lines; a tag is one line")
        if tag not in tags:
            tags.append(tag)
    return tags


def _json_list(text: str) -> list[str] | None:
    """``text`` as a JSON list of strings, or None when it is not one."""
    if not text.lstrip().startswith("["):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def tags_as_text(tags: Iterable[Any] | None) -> str:
    """Stored tags (a list of strings) as the text :func:`parse_tag_text` reads back: ``"a, b"``."""
    return ", ".join(str(tag) for tag in tags or [])


class TagsTextField(forms.CharField):
    """A form field showing a tag list as ``a, b, c`` and cleaning the text to the list
    (:func:`parse_tag_text`); its errors name the form field."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("max_length", TAGS_MAX_CHARS)
        kwargs.setdefault("help_text", "comma-separated, e.g. math, hard")
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> Any:
        """The list a model holds, or the text the user typed (redisplayed on an error), as text."""
        return tags_as_text(value) if isinstance(value, list | tuple) else value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]  # text in, list out
        """The typed text's tags; a list (a form's initial value) is taken as is."""
        if isinstance(value, list | tuple):
            return [str(tag) for tag in value]
        text = super().to_python(value)
        try:
            return parse_tag_text(text, field=str(self.label or "tags"))
        except TagTextError as exc:
            raise ValidationError(str(exc), code="invalid") from exc

    def run_validators(self, value: Any) -> None:
        """The length limit applies to the text (checked by :func:`parse_tag_text`), not the list."""

    def validate(self, value: Any) -> None:
        """Blank is allowed unless the field is required (no tags: ``[]``)."""
        if self.required and not value:
            raise ValidationError(self.error_messages["required"], code="required")
