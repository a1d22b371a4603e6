"""The one error every case-bank loader raises."""

from __future__ import annotations

__all__ = ["CaseBankError", "CaseBankErrors", "too_deep_error"]


TOO_DEEP = "a value is nested too deeply (hundreds of [ or { inside each other): flatten it"
"""The reason given for JSON nested past what the parser's recursion allows."""


def too_deep_error(path: object) -> CaseBankError:
    """The one-line refusal of a file whose reading ran into Python's recursion limit (the last
    resort: readers refuse nesting over :data:`~evalcore.loaders.limits.MAX_DEPTH` before that)."""
    return CaseBankError(TOO_DEEP, path=str(path))


class CaseBankError(ValueError):
    """A case bank that cannot be loaded, located as precisely as the file allows.

    ``str(err)`` reads like a compiler message, e.g.
    ``examples/sets/qa.jsonl:12: field 'id': duplicate case id 'q7' (first seen on line 3)``;
    with a column it is ``path:line:column: ...``.

    Attributes:
        path: The file, as the caller named it.
        line: 1-based line number of the offending record (its first line for multi-line
            records), or ``None`` when the problem is the whole file.
        field: The field as named in the file (the source column when ``mapping`` renamed it),
            with a ``.key`` / ``[index]`` path for nested values (e.g. ``metadata.score``), or ``None``.
        column: 1-based column: the character column for JSON syntax errors, the byte column for
            encoding errors, the cell's position for CSV; ``None`` when unknown.
        reason: The message without the location prefix.
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str,
        line: int | None = None,
        field: str | None = None,
        column: int | None = None,
    ) -> None:
        self.reason = reason
        self.path = str(path)
        self.line = line
        self.field = field
        self.column = column
        super().__init__(self._format())

    def _format(self) -> str:
        location = self.path
        if self.line is not None:
            location += f":{self.line}"
            if self.column is not None:
                location += f":{self.column}"
        prefix = f"{location}: "
        if self.field is not None:
            prefix += f"field {self.field!r}: "
        return prefix + self.reason

    def __str__(self) -> str:
        return self._format()

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # Keyword-only arguments do not survive the default exception pickling (process pools).
        return (_rebuild, (self.reason, self.path, self.line, self.field, self.column))


def _rebuild(reason: str, path: str, line: int | None, field: str | None, column: int | None) -> CaseBankError:
    return CaseBankError(reason, path=path, line=line, field=field, column=column)


class CaseBankErrors(CaseBankError):
    """Several problems found in one case bank (``load_cases(..., max_errors=N)`` with N > 1).

    It is a :class:`CaseBankError` located at the first problem, so a caller that shows one
    message still can; ``str(err)`` adds how many more there are.

    Attributes:
        errors: Every problem found, in file order (at most the ``max_errors`` asked for).
        truncated: True when the loader stopped looking at ``max_errors``.
    """

    def __init__(self, errors: list[CaseBankError], *, truncated: bool = False) -> None:
        if not errors:
            raise ValueError("CaseBankErrors needs at least one error")
        self.errors = list(errors)
        self.truncated = truncated
        first = errors[0]
        super().__init__(first.reason, path=first.path, line=first.line, field=first.field, column=first.column)

    def _format(self) -> str:
        text = super()._format()
        more = len(getattr(self, "errors", ())) - 1
        if more > 0:
            text += f" (and {more}{'+' if self.truncated else ''} more problem{'s' if more != 1 else ''})"
        return text

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (_rebuild_many, (self.errors, self.truncated))


def _rebuild_many(errors: list[CaseBankError], truncated: bool) -> CaseBankErrors:
    return CaseBankErrors(errors, truncated=truncated)
