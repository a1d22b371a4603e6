"""The one base of the errors the project raises on purpose (bad input, a missing thing, a clash).

Django-free, so the engine's errors derive from it too. The API maps the three kinds once
(``evalsite.api``): :class:`InvalidInputError` -> 400, :class:`NotFoundError` -> 404,
:class:`ConflictError` -> 409. Anything else escaping a route is a bug and answers 500.
"""

from __future__ import annotations


class EvalsiteError(Exception):
    """A domain error: its message is meant for the user as is.

    Attributes:
        field: The input at fault (``"variant"``, ``"allow_test"``, ...), ``None`` when no
            single input is; a subclass may set a default, an instance may override it.
    """

    field: str | None = None

    def __init__(self, *args: object, field: str | None = None) -> None:
        super().__init__(*args)
        if field is not None:
            self.field = field

    @property
    def message(self) -> str:
        """The message (``str(exc)``), never empty."""
        return str(self.args[0]) if self.args else type(self).__name__


class InvalidInputError(EvalsiteError, ValueError):
    """The request itself is wrong (a bad value, a refused option): HTTP 400.

    Also a ``ValueError``, so callers that caught the errors it replaces keep working.
    """


class NotFoundError(EvalsiteError, LookupError):
    """What the request names does not exist (a target, a case, a run): HTTP 404.

    Also a ``LookupError``, so callers that caught the errors it replaces keep working.
    """


class ConflictError(EvalsiteError):
    """The request is valid but clashes with the current state (a run busy elsewhere): HTTP 409."""
