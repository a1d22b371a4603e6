"""Split assignment and the held-out guard.

Every case belongs to one split: ``train`` (tune freely), ``dev`` (choose between versions) or
``test`` (the held-out lockbox). A case file may name the split; otherwise it is derived from a
hash of the set name and case id (:func:`assign_split`), so a case keeps its split when other
cases are added or removed. Running on ``test`` needs an explicit opt-in (:func:`guard_split`).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from evalcore.errors import InvalidInputError
from evalcore.types import SPLITS, Case

__all__ = [
    "ALL",
    "DEFAULT_RATIOS",
    "SPLITS",
    "SPLIT_CHOICES",
    "HeldOutError",
    "assign_split",
    "check_split_aliases",
    "filter_split",
    "guard_split",
    "parse_split_ratios",
    "split_counts",
    "validate_split",
]

ALL = "all"
"""The pseudo-split selecting every case (it includes ``test``, so the guard treats it as held out)."""

SPLIT_CHOICES: tuple[str, ...] = (*SPLITS, ALL)
"""Values accepted wherever a split is chosen for a run (CLI ``--split``, API ``split``)."""

DEFAULT_RATIOS: tuple[float, float, float] = (0.6, 0.2, 0.2)
"""Default train/dev/test shares for hashed assignment."""

_HELD_OUT = "test"


class HeldOutError(InvalidInputError):
    """Raised when a run would touch the held-out ``test`` split without an explicit opt-in.

    Attributes:
        split: The split that was requested (``"test"`` or ``"all"``).
    """

    field = "allow_test"

    def __init__(self, message: str, *, split: str = "test") -> None:
        super().__init__(message)
        self.split = split

    def __reduce__(self) -> tuple[type[HeldOutError], tuple[str], dict[str, str]]:
        # Keyword-only __init__ needs help to survive pickling (process pools, task queues).
        return (type(self), (str(self),), {"split": self.split})

    def __setstate__(self, state: dict[str, Any] | None) -> None:
        self.split = str((state or {}).get("split", "test"))


def validate_split(name: str) -> str:
    """Check that ``name`` is one of ``train``, ``dev``, ``test`` and return it.

    Names are matched exactly: ``"validation"``, ``"val"`` or ``"Test"`` are rejected rather than
    mapped, because a silently remapped split could leak held-out cases into tuning.

    Args:
        name: The split name to check.

    Returns:
        The same name.

    Raises:
        ValueError: If ``name`` is not a split name; the message lists the valid ones.
    """
    if isinstance(name, str) and name in SPLITS:
        return name
    raise ValueError(f"unknown split {name!r}; valid splits are: {', '.join(SPLITS)}")


def _validate_choice(split: str) -> str:
    if isinstance(split, str) and split in SPLIT_CHOICES:
        return split
    raise ValueError(f"unknown split {split!r}; choose one of: {', '.join(SPLIT_CHOICES)}")


def _normalise_ratios(ratios: Sequence[float]) -> tuple[float, float, float]:
    values = tuple(ratios)
    if len(values) != len(SPLITS):
        raise ValueError(f"split ratios need {len(SPLITS)} values (train, dev, test), got {len(values)}")
    floats: list[float] = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"split ratio {value!r} is not a number")
        number = float(value)
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"split ratio {value!r} must be a finite number >= 0")
        floats.append(number)
    total = sum(floats)
    if total <= 0:
        raise ValueError("split ratios must not all be zero")
    return (floats[0] / total, floats[1] / total, floats[2] / total)


@lru_cache(maxsize=64)
def _thresholds(ratios: tuple[float, ...]) -> tuple[float, float]:
    """Upper bounds of the train and dev buckets in [0, 1).

    A bound becomes infinite when every later split has ratio 0, so float rounding in the
    cumulative sum can never drop a stray case into a split that was asked to be empty.
    """
    train, dev, test = _normalise_ratios(ratios)
    dev_bound = math.inf if test == 0 else train + dev
    train_bound = math.inf if dev == 0 and test == 0 else train
    return train_bound, dev_bound


def _unit_hash(set_name: str, case_id: str) -> float:
    digest = hashlib.sha256(f"{set_name}\x00{case_id}".encode()).digest()
    # 64 bits give a uniform value in [0, 1) with far finer resolution than any ratio needs.
    return int.from_bytes(digest[:8], "big") / 2**64  # pragma: no mutate ("big" is also the default)


def assign_split(set_name: str, case_id: str, ratios: Sequence[float] = DEFAULT_RATIOS) -> str:
    """The split a case gets when its file names none: a stable hash bucket.

    ``sha256(f"{set_name}\\x00{case_id}")``'s first 8 bytes, read as a big-endian integer and divided
    by 2**64, give a value ``u`` uniform in [0, 1). ``u < train`` is ``train``, ``u < train + dev``
    is ``dev``, the rest is ``test`` (ratios normalised to sum to 1). The result depends only on the
    set name, the case id and the ratios, so adding or removing other cases never moves a case.

    Args:
        set_name: The eval set's name (part of the hash, so two sets split independently).
        case_id: The case's id.
        ratios: Shares of train, dev and test; any non-negative numbers with a positive sum.

    Returns:
        ``"train"``, ``"dev"`` or ``"test"``.

    Raises:
        ValueError: If ``ratios`` is not three finite non-negative numbers with a positive sum.
    """
    train_bound, dev_bound = _thresholds(tuple(ratios))
    u = _unit_hash(set_name, case_id)
    if u < train_bound:  # pragma: no mutate (u equals a bound with probability 2**-64: < and <= alike)
        return "train"
    if u < dev_bound:  # pragma: no mutate (as above)
        return "dev"
    return "test"


_RATIO_SEPARATORS = re.compile(r"[/,:]")


def parse_split_ratios(text: str) -> tuple[float, float, float]:
    """Parse a CLI ratio string such as ``"60/20/20"`` or ``"0.7,0.15,0.15"``.

    Parts may be separated by ``/``, ``,`` or ``:`` and are normalised to sum to 1, so percentages
    and fractions both work.

    Args:
        text: Three non-negative numbers (train, dev, test).

    Returns:
        The normalised ``(train, dev, test)`` shares, each in 0..1, summing to 1.

    Raises:
        ValueError: On a wrong number of parts, a non-number, a negative value or an all-zero split.
    """
    parts = [part.strip() for part in _RATIO_SEPARATORS.split(text.strip())]
    if len(parts) != len(SPLITS):
        raise ValueError(f"bad split ratios {text!r}: expected three numbers for train/dev/test, e.g. 60/20/20")
    numbers: list[float] = []
    for part in parts:
        try:
            numbers.append(float(part))
        except ValueError:
            raise ValueError(f"bad split ratios {text!r}: {part!r} is not a number (e.g. 60/20/20)") from None
    try:
        return _normalise_ratios(numbers)
    except ValueError as exc:
        raise ValueError(f"bad split ratios {text!r}: {exc}") from None


def guard_split(split: str, allow_test: bool) -> None:
    """Refuse to run the held-out split unless the caller opted in.

    ``"all"`` counts as held out too, because it includes the ``test`` cases.

    Args:
        split: ``"train"``, ``"dev"``, ``"test"`` or ``"all"``.
        allow_test: The explicit opt-in (CLI ``--allow-test``, API ``allow_test``).

    Raises:
        HeldOutError: If ``split`` is ``"test"`` or ``"all"`` and ``allow_test`` is false.
        ValueError: If ``split`` is not a known split or ``"all"``.
    """
    _validate_choice(split)
    if allow_test:
        return
    if split == _HELD_OUT:
        raise HeldOutError(
            "split 'test' is held out: pass --allow-test (allow_test=True) to run on it; "
            "every run on the test split is recorded, so tune on train and choose on dev",
            split=split,
        )
    if split == ALL:
        raise HeldOutError(
            "split 'all' includes the held-out test split: pass --allow-test (allow_test=True) "
            "to run on it, or choose --split train or --split dev",
            split=split,
        )


def filter_split(cases: Iterable[Case], split: str) -> list[Case]:
    """The cases in ``split``, in their original order.

    Args:
        cases: Cases whose ``split`` is already assigned (cases with ``split=None`` only match ``"all"``).
        split: ``"train"``, ``"dev"``, ``"test"`` or ``"all"`` (every case).

    Returns:
        A new list.

    Raises:
        ValueError: If ``split`` is not a known split or ``"all"``.
    """
    _validate_choice(split)
    if split == ALL:
        return list(cases)
    return [case for case in cases if case.split == split]


def split_counts(cases: Iterable[Case]) -> dict[str, int]:
    """Number of cases per split, with every split name present (``"unsplit"`` only if any).

    Args:
        cases: Any cases.

    Returns:
        ``{"train": n, "dev": n, "test": n}`` plus ``"unsplit"`` for cases whose split is ``None``.
    """
    counts = dict.fromkeys(SPLITS, 0)
    for case in cases:
        key = case.split if case.split is not None else "unsplit"
        counts[key] = counts.get(key, 0) + 1
    return counts


def parse_split_aliases(text: str | None) -> dict[str, str]:
    """Parse split aliases ``"test=dev,validate=test"`` into ``{file name: split}``.

    Aliases map a bank's own split names to evalsite's at import, all at once (``test=dev,
    validate=test`` sends the file's ``test`` to ``dev`` and its ``validate`` to ``test``; no
    chaining). Names without an alias must still be ``train``/``dev``/``test``. ``None`` or
    blank text: no aliases.

    Raises:
        InvalidInputError: (a ``ValueError``) An item without ``=``, an empty name, a target that
            is no split, or a name given twice; the message names the item.
    """
    aliases: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, split = (part.strip() for part in item.partition("="))
        if not sep or not name or not split:
            raise InvalidInputError(f"split alias {item.strip()!r}: expected NAME=SPLIT, e.g. validate=test")
        if split not in SPLITS:
            raise InvalidInputError(
                f"split alias {item.strip()!r}: {split!r} is no split (splits: {', '.join(SPLITS)})"
            )
        if name in aliases:
            raise InvalidInputError(f"split alias {item.strip()!r}: {name!r} is aliased twice")
        aliases[name] = split
    return aliases


def check_split_aliases(aliases: Mapping[str, str] | None) -> dict[str, str]:
    """A copy of ``aliases`` (``{}`` for ``None``) once every name is a non-empty string and every
    target a split.

    Raises:
        InvalidInputError: (a ``ValueError``) A bad pair, named.
    """
    checked = dict(aliases or {})
    for name, split in checked.items():
        if not isinstance(name, str) or not name or split not in SPLITS:
            raise InvalidInputError(f"split alias {name!r}={split!r}: the target must be one of {', '.join(SPLITS)}")
    return checked
