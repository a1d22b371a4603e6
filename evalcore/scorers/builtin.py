"""Built-in deterministic scorers.

Each is a small dataclass: options in fields, one async ``score(ctx)``. Listed in
:data:`evalcore.scorer_registry.BUILTIN_SCORERS`, so a stored spec ``{name, args, version}``
rebuilds it.

Here: ``exact_match``, ``contains``, ``regex``, ``predicate``. In sibling modules:
``numeric_match`` (:mod:`~evalcore.scorers.numbers`), ``json_match``
(:mod:`~evalcore.scorers.jsonmatch`), ``citation_set`` (:mod:`~evalcore.scorers.citations`) and
``tool_calls`` (:mod:`~evalcore.scorers.trajectory`).
"""

from __future__ import annotations

import importlib
import inspect
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

from evalcore.scorers.base import ScoreContext, Scorer, ScorerSpecError, call_user_function
from evalcore.scorers.jsonmatch import (
    canonical_text,
    is_number,
    json_diff,
    number_from_text,
)
from evalcore.types import Score

__all__ = ["Contains", "ExactMatch", "Predicate", "Regex"]

_REGEX_FLAGS: dict[str, re.RegexFlag] = {
    "i": re.IGNORECASE,
    "m": re.MULTILINE,
    "s": re.DOTALL,
    "x": re.VERBOSE,
    "a": re.ASCII,
}


NormalForm = Literal["NFC", "NFKC", "NFD", "NFKD"]
"""A Unicode normal form, as :func:`unicodedata.normalize` names it."""


def _prepared(text: str, form: str | None, *, strip: bool, casefold: bool) -> str:
    """``text`` in normal form ``form`` (``None``: as it is), stripped and casefolded as asked
    (casefolding may leave a normal form, so the form is applied again after it)."""
    normal = cast(NormalForm | None, form)  # one of NORMAL_FORMS: check_normal_form saw to it
    if normal:
        text = unicodedata.normalize(normal, text)
    if strip:
        text = text.strip()
    if casefold:
        text = text.casefold()
        if normal:
            text = unicodedata.normalize(normal, text)
    return text


def _shown(value: Any) -> str:
    # a string as its repr, anything else as JSON text: 'true' (text) and true (bool) look different
    text = repr(value) if isinstance(value, str) else canonical_text(value)
    return text if len(text) <= 80 else text[:79] + "…"


NORMAL_FORMS: tuple[str, ...] = ("NFC", "NFKC", "NFD", "NFKD")
"""The Unicode normal forms a text scorer's ``normalize`` option accepts (``None``: none)."""


def check_normal_form(scorer: str, form: str | None) -> str | None:
    """``form`` as a text scorer's ``normalize`` option stores it: upper case, ``None`` for none
    (``None``, ``""`` or ``"none"``, as a CLI spec can only spell it).

    Raises:
        ScorerSpecError: Not one of :data:`NORMAL_FORMS`.
    """
    if form is None or (isinstance(form, str) and form.strip().lower() in ("", "none")):
        return None
    if isinstance(form, str) and form.strip().upper() in NORMAL_FORMS:
        return form.strip().upper()
    raise ScorerSpecError(f"{scorer}: normalize must be one of {', '.join(NORMAL_FORMS)} or none, got {form!r}")


def normal_form_hint(expected: Any, output: Any, form: str | None) -> str:
    """A note for a failed text comparison whose two sides are the same text in another Unicode
    normal form than ``form`` (the scorer's ``normalize``) puts them in; ``""`` otherwise."""
    if not (isinstance(expected, str) and isinstance(output, str)) or expected == output:
        return ""
    nfc = unicodedata.normalize
    if form is None and nfc("NFC", expected) == nfc("NFC", output):
        return " (the same text in another Unicode normal form, e.g. é composed vs e + U+0301: normalize=NFC matches)"
    if form not in ("NFKC", "NFKD") and nfc("NFKC", expected) == nfc("NFKC", output):
        return (
            " (equal once compatibility characters are folded, e.g. the ﬁ ligature, a no-break space, full-width"
            " letters: normalize=NFKC matches)"
        )
    return ""


def _old_normalize(args: dict[str, Any], version: str, since: str) -> dict[str, Any]:
    """``args`` of a spec stored before ``normalize`` existed (its version below ``since``), with
    the option off, as it compared then."""
    if "normalize" in args or not version.isdigit() or int(version) >= int(since):
        return args
    return {**args, "normalize": None}


def _require_expected(ctx: ScoreContext) -> Any:
    if not ctx.case.has_expected:
        raise ValueError(f"case {ctx.case.id!r} has no expected value")
    return ctx.case.expected


@dataclass
class ExactMatch(Scorer):
    """Output equals expected, compared as JSON values. Options: ``strip``, ``casefold``.

    Equality is structural over JSON values (version 2; version 1 compared ``json.dumps`` text):

    * numbers compare by value: ``1`` equals ``1.0``, ``{"a": 1}`` equals ``{"a": 1.0}``; ``NaN``
      equals nothing, not even ``NaN``;
    * ``bool`` is not a number: ``True`` never equals ``1``; ``None`` only equals ``None``;
    * object key order never matters, array order does (tuples are arrays);
    * strings compare as text, after ``strip`` / ``casefold`` (applied to every string value,
      nested ones too; object keys compare as they are).

    One cross-type rule, on purpose, for *text* targets whose answer is a number: when exactly
    one side is a string and the other a number, the string is read as a JSON number literal
    (:func:`~evalcore.scorers.jsonmatch.number_from_text`; surrounding whitespace ignored) and
    compared by value, so ``"42"`` and ``" 42.0"`` equal ``42``. This applies at the top level
    only. No other string ever equals a non-string: ``"true"`` is not ``True``, ``"null"`` is not
    ``None``, ``'{"a": 1}'`` is not ``{"a": 1}`` (parse JSON text with ``json_match``).

    Version 3 adds ``normalize`` (default ``"NFC"``): text that is the same in another Unicode
    normal form is equal. A spec stored before it rebuilds with ``normalize=None``.
    """

    name: ClassVar[str] = "exact_match"
    version: ClassVar[str] = "3"
    strip: bool = True
    """Ignore leading and trailing whitespace."""
    casefold: bool = False
    """Ignore case (Unicode casefolding, so "Straße" equals "STRASSE")."""
    normalize: str | None = "NFC"
    """Unicode normal form every string is put in first: ``"NFC"`` (canonically equal text is
    equal: ``é`` composed or ``e`` + U+0301), ``"NFKC"`` (also folds compatibility characters: the
    ``ﬁ`` ligature, full-width letters, a no-break space), ``"NFD"`` / ``"NFKD"`` (the same
    equalities), or ``None`` (code points as given)."""

    def __post_init__(self) -> None:
        self.normalize = check_normal_form(self.name, self.normalize)

    @classmethod
    def stored_args(cls, args: dict[str, Any], version: str) -> dict[str, Any]:
        """A spec stored before version 3 compares code points as given (``normalize=None``)."""
        return _old_normalize(args, version, "3")

    def _norm(self, value: Any) -> Any:
        """Every string inside ``value`` normalized / stripped / casefolded (keys left alone)."""
        if isinstance(value, str):
            return _prepared(value, self.normalize, strip=self.strip, casefold=self.casefold)
        if isinstance(value, dict):
            return {k: self._norm(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._norm(v) for v in value]
        return value

    async def score(self, ctx: ScoreContext) -> Score:
        """Compare; raises ValueError when the case has no expected value."""
        expected, output = self._norm(_require_expected(ctx)), self._norm(ctx.output)
        if isinstance(output, str) != isinstance(expected, str) and (is_number(output) or is_number(expected)):
            # the documented text-vs-number rule: a numeric string stands for its number
            if isinstance(output, str):
                output = number_from_text(output) if number_from_text(output) is not None else output
            else:
                expected = number_from_text(expected) if number_from_text(expected) is not None else expected
        diff = json_diff(expected, output)
        if diff is None:
            return Score(self.name, True)
        explanation = f"output {_shown(output)} != expected {_shown(expected)}"
        if diff.path != "$":
            explanation += f" (at {diff.path}: {diff.reason})"
        explanation += normal_form_hint(expected, output, self.normalize)
        return Score(self.name, False, explanation=explanation)


@dataclass
class Contains(Scorer):
    """The output text contains the expected text (or all / any of several).

    The needles are the ``value`` option when given, else the case's expected value: a string
    or a list of strings. Non-string outputs are read as canonical JSON text.

    An empty needle (``""``) is refused, never passed: every text contains it, so it says nothing
    about the output. The ``value`` option is checked when the scorer is built
    (:class:`ScorerSpecError`), an expected ``""`` when the case is scored (the score is an error
    that says so; ``exact_match`` is the scorer that requires an empty answer).

    Version 2 adds ``normalize`` (default ``"NFC"``), applied to the output and the needles alike;
    a spec stored before it rebuilds with ``normalize=None``.
    """

    name: ClassVar[str] = "contains"
    version: ClassVar[str] = "2"
    value: str | list[str] | None = None
    """Needle(s) to look for instead of the expected value."""
    mode: str = "all"
    """``"all"``: every needle must occur. ``"any"``: one is enough."""
    casefold: bool = False
    """Ignore case."""
    normalize: str | None = "NFC"
    """Unicode normal form the output and the needles are put in first (as ``exact_match``'s:
    ``"NFC"``, ``"NFKC"``, ``"NFD"``, ``"NFKD"`` or ``None``)."""

    def __post_init__(self) -> None:
        if self.mode not in ("all", "any"):
            raise ScorerSpecError(f"contains: mode must be 'all' or 'any', got {self.mode!r}")
        self.normalize = check_normal_form(self.name, self.normalize)
        if self.value is not None:
            try:
                _needles(self.value, "the value option")
            except ValueError as exc:
                raise ScorerSpecError(str(exc)) from None

    @classmethod
    def stored_args(cls, args: dict[str, Any], version: str) -> dict[str, Any]:
        """A spec stored before version 2 compares code points as given (``normalize=None``)."""
        return _old_normalize(args, version, "2")

    async def score(self, ctx: ScoreContext) -> Score:
        """Look for the needles; raises ValueError when there are none, one is empty, or they are
        not strings."""
        if self.value is not None:
            needles = _needles(self.value, "the value option")
        else:
            needles = _needles(_require_expected(ctx), "the expected value")
        output = canonical_text(ctx.output)
        form, casefold = self.normalize, self.casefold
        text = _prepared(output, form, strip=False, casefold=casefold)
        found = [n for n in needles if _prepared(n, form, strip=False, casefold=casefold) in text]
        missing = [n for n in needles if n not in found]
        ok = bool(found) if self.mode == "any" else not missing
        if ok:
            explanation = None
        elif self.mode == "any":
            explanation = f"none of {needles!r} in output"
        else:
            explanation = f"missing from output: {missing!r}"
        if not ok:
            explanation = f"{explanation}{_contains_form_hint(needles, output, form, casefold, self.mode)}"
        return Score(self.name, ok, explanation=explanation, metadata={"found": found, "missing": missing})


def _needles(raw: Any, source: str) -> list[str]:
    """The needles of a ``contains`` scorer from ``raw`` (a string or a list of strings).

    Raises:
        ValueError: Not a string nor a non-empty list of strings, or an empty string among them.
    """
    needles = [raw] if isinstance(raw, str) else raw
    if not isinstance(needles, list) or not needles or not all(isinstance(n, str) for n in needles):
        raise ValueError(f"contains needs a string or a non-empty list of strings, got {raw!r}")
    if "" in needles:
        which = "" if len(needles) == 1 else f" (needle {needles.index('') + 1} of {len(needles)})"
        raise ValueError(
            f"contains: {source} is an empty string{which}: every output contains it, so it cannot tell a "
            "right answer from a wrong one; give the text to look for, or score an empty answer with exact_match"
        )
    return needles


def _contains_form_hint(needles: list[str], output: str, form: str | None, casefold: bool, mode: str) -> str:
    """Why a ``contains`` that failed would pass in another Unicode normal form, or ``""``."""
    for weaker, hint in (
        ("NFC", " (found in another Unicode normal form, e.g. é composed vs e + U+0301: normalize=NFC matches)"),
        ("NFKC", " (found once compatibility characters are folded, e.g. the ﬁ ligature: normalize=NFKC matches)"),
    ):
        if form in (weaker, "NFKC", "NFKD") or (form == "NFD" and weaker == "NFC"):
            continue
        text = _prepared(output, weaker, strip=False, casefold=casefold)
        hits = [_prepared(n, weaker, strip=False, casefold=casefold) in text for n in needles]
        if any(hits) if mode == "any" else all(hits):
            return hint
    return ""


def _compile(pattern: str, flags: str) -> re.Pattern[str]:
    value = 0
    for letter in flags:
        if letter not in _REGEX_FLAGS:
            raise ScorerSpecError(f"regex: unknown flag {letter!r} (known: {''.join(_REGEX_FLAGS)})")
        value |= _REGEX_FLAGS[letter]
    try:
        return re.compile(pattern, value)
    except re.error as exc:
        raise ScorerSpecError(f"regex: invalid pattern {pattern!r}: {exc}") from None


@dataclass
class Regex(Scorer):
    """The output text matches a regular expression (Python ``re`` syntax).

    The pattern is the ``pattern`` option, else the case's expected value (a string). By
    default the pattern may match anywhere (``re.search``); ``fullmatch`` requires the whole
    (stripped) output to match.

    Raises ScorerSpecError (a ValueError) for an invalid pattern or flag: at construction for the
    ``pattern`` option, when scoring for a pattern taken from the case. An empty pattern without
    ``fullmatch`` is refused the same way (a scorer error, never a pass): it matches every output,
    so it cannot tell a right answer from a wrong one (as ``contains`` refuses an empty needle).
    """

    name: ClassVar[str] = "regex"
    version: ClassVar[str] = "1"
    pattern: str | None = None
    """The pattern; ``None`` to use the expected value."""
    flags: str = ""
    """Letters: ``i`` ignore case, ``m`` multiline, ``s`` dot matches newline, ``x`` verbose, ``a`` ASCII."""
    fullmatch: bool = False
    """The whole output must match, not just a part of it."""
    strip: bool = True
    """Strip surrounding whitespace from the output first (a trailing newline would defeat ``fullmatch``)."""

    def __post_init__(self) -> None:
        _compile(self.pattern if self.pattern is not None else "", self.flags)
        if self.pattern is not None:
            self._refuse_empty(self.pattern, "the pattern option")

    def _refuse_empty(self, pattern: str, source: str) -> None:
        if pattern == "" and not self.fullmatch:
            raise ScorerSpecError(
                f"regex: {source} is empty: it matches every output, so it cannot tell a right answer from a "
                "wrong one; give a pattern, or fullmatch=true to require an empty answer"
            )

    async def score(self, ctx: ScoreContext) -> Score:
        """Match; raises when the pattern is missing, empty (without ``fullmatch``) or invalid."""
        pattern = self.pattern if self.pattern is not None else _require_expected(ctx)
        if not isinstance(pattern, str):
            raise ValueError(f"regex needs a string pattern, got {type(pattern).__name__}")
        self._refuse_empty(pattern, "the expected value" if self.pattern is None else "the pattern option")
        compiled = _compile(pattern, self.flags)
        text = canonical_text(ctx.output)
        if self.strip:
            text = text.strip()
        match = compiled.fullmatch(text) if self.fullmatch else compiled.search(text)
        if match is None:
            how = "does not fully match" if self.fullmatch else "has no match for"
            return Score(self.name, False, explanation=f"output {how} /{pattern}/{self.flags}")
        return Score(self.name, True, metadata={"match": match.group(0)})


def import_callable(path: str) -> Callable[..., Any]:
    """Import a function from ``"package.module.func"`` or ``"package.module:Class.method"``.

    This is the inverse of how :meth:`Scorer.spec` names a callable (module + qualified name),
    so a predicate defined at module level survives a spec round trip.

    Raises:
        ScorerSpecError: Not importable (e.g. a lambda or a function defined inside another).
    """
    if "<" in path:
        raise ScorerSpecError(f"predicate {path!r} is a local function or lambda; pass the function itself")
    if ":" in path:
        candidates = [tuple(path.split(":", 1))]
    else:
        parts = path.split(".")
        candidates = [(".".join(parts[:i]), ".".join(parts[i:])) for i in range(len(parts) - 1, 0, -1)]
    for module_name, attr_path in candidates:
        try:
            obj: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        try:
            for attr in attr_path.split("."):
                obj = getattr(obj, attr)
        except AttributeError:
            continue
        if callable(obj):
            return cast(Callable[..., Any], obj)  # pragma: no mutate (cast only informs the type checker)
    raise ScorerSpecError(f"predicate {path!r} is not an importable function")


@dataclass
class Predicate(Scorer):
    """Any user function ``fn(output, expected)`` or ``fn(ctx)``, sync or async, as a scorer.

    What the function returns decides what the score is:

    * ``bool``: a verdict (``True`` pass, ``False`` fail);
    * a number in 0..1: a *measurement* (value only, no verdict) unless ``threshold`` is set,
      then the verdict is ``value >= threshold``. A float never becomes a verdict on its own:
      a case whose only scores are measurements is *unscored*, not passed;
    * a :class:`~evalcore.types.Score`: kept as it is.

    A plain function listed among a target's scorers is wrapped in a ``Predicate``; its score,
    its errors and its gate all go by the function's name (or ``label``). ``fn`` may also be an
    import path (``"mypkg.checks.is_polite"``), which is what its spec stores, so a module-level
    predicate can be rebuilt from a stored spec: ``predicate:fn=mypkg.checks.ratio,threshold=0.5``.

    Raises:
        ScorerSpecError: ``fn`` neither callable nor importable, or ``threshold`` not in 0..1.
    """

    name: ClassVar[str] = "predicate"
    version: ClassVar[str] = "2"
    fn: Callable[..., Any] | str
    """The function, sync or async, or its import path."""
    label: str | None = None
    """Score name; defaults to the function's ``__name__``."""
    threshold: float | None = None
    """Lowest numeric value (0..1) that passes; ``None``: a numeric result only measures."""

    def __post_init__(self) -> None:
        if isinstance(self.fn, str):
            self.fn = import_callable(self.fn)
        elif not callable(self.fn):
            raise ScorerSpecError(f"predicate: fn must be callable or an import path, got {self.fn!r}")
        if self.threshold is not None and (
            isinstance(self.threshold, bool)
            or not isinstance(self.threshold, int | float)
            or not 0.0 <= self.threshold <= 1.0
        ):
            raise ScorerSpecError(f"predicate: threshold must be a number in 0..1, got {self.threshold!r}")

    @property
    def score_name(self) -> str:
        """The name the user sees: ``label``, else the function's ``__name__``."""
        return self.label or getattr(self.fn, "__name__", None) or self.name

    @property
    def score_names(self) -> list[str]:
        """One score, named :attr:`score_name` (so its errors and gates use that name too)."""
        return [self.score_name]

    async def score(self, ctx: ScoreContext) -> Score:
        """Call the function; raises TypeError when it returns something else than bool/float/Score."""
        fn: Callable[..., Any] = self.fn  # type: ignore[assignment]  # a str was resolved in __post_init__
        name = self.score_name
        params = [p for p in inspect.signature(fn).parameters.values() if p.default is p.empty]
        # a plain function runs on a daemon thread: a slow or stuck check never blocks the loop
        args = (ctx,) if len(params) == 1 else (ctx.output, ctx.case.expected)
        result = await call_user_function(fn, *args)
        if isinstance(result, Score):
            return result
        if type(result).__module__ == "numpy" and hasattr(result, "item"):
            result = result.item()  # numpy.bool_ / numpy.float32 ... as the Python value they hold
        if isinstance(result, bool):
            return Score(name, result)
        if isinstance(result, int | float):
            value = float(result)
            if self.threshold is None:
                return Score(name, value, explanation="measurement: no threshold, no verdict")
            ok = value >= self.threshold
            explanation = f"{value:.3f} {'>=' if ok else '<'} threshold {self.threshold:g}"
            return Score(name, value, passed=ok, explanation=explanation)
        raise TypeError(f"predicate {name!r} returned {type(result).__name__}; expected bool, float or Score")
