"""HotpotQA: a two-node retrieve -> answer pipeline, deterministic and offline (no LLM).

Each case gives a question and its 10 candidate paragraphs (2 gold, 8 distractors: the
HotpotQA *distractor* setting). The pipeline:

* ``retrieve`` ranks the 10 paragraphs with BM25 (``rank_bm25.BM25Okapi``) and keeps the top k;
  it cites their titles. Evaluated alone as ``hotpotqa-retrieve`` with ``citation_set``
  against the gold supporting titles.
* ``answer`` picks an answer from the kept paragraphs with simple rules: yes/no for
  "Are both X and Y ...?" questions, one of the two named options for "X or Y?" questions,
  else a span (a year, a number or a name, by the question word) from the sentence that
  overlaps the question most. Evaluated end to end as ``hotpotqa-agent`` with ``answer_em``
  and ``answer_f1`` (HotpotQA's official answer metrics, defined below).

Variants ``top2`` and ``top4`` keep 2 or 4 paragraphs: top2 cites more precisely, top4
recalls more of the gold paragraphs (and gives the answer step more to read).

Data: HotpotQA dev (distractor), first 100 questions, CC BY-SA 4.0 (see examples/README.md).
"""

# No "from __future__ import annotations" here, on purpose: discovery executes this file without
# registering it in sys.modules, and dataclasses must then resolve string annotations through
# sys.modules[cls.__module__], which fails. Real annotation objects need no lookup.
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rank_bm25 import BM25Okapi

from evalcore.discovery import TargetSpec
from evalcore.scorers.base import ScoreContext, Scorer, register
from evalcore.targets import Pipeline, as_agent
from evalcore.types import Score

STOPWORDS: frozenset[str] = frozenset(
    """a an and are as at be been but by did do does for from had has have he her his how in into is it
    its of on or she that the their there these they this to was were what when where which who whom whose
    why will with would""".split()
)
"""Words dropped before ranking: the commonest function words (a small list on purpose)."""

_WORD = re.compile(r"[a-z0-9]+")


def _input_field(input: Any, name: str, kind: type) -> Any:
    """``input[name]``, checked: a clear message (never a bare ``KeyError``) when the input is
    not this pipeline's ``{"question": str, "paragraphs": [{"title", "text"}, ...]}``.

    Raises:
        ValueError: ``input`` is not an object with ``name`` of type ``kind``.
    """
    value = input.get(name) if isinstance(input, Mapping) else None
    ok = isinstance(value, str) if kind is str else isinstance(value, Sequence) and not isinstance(value, str)
    if not ok:
        raise ValueError(
            f'this pipeline takes {{"question": str, "paragraphs": [{{"title", "text"}}, ...]}}; '
            f"the input has no {name!r} {kind.__name__}"
        )
    return value


def tokenize(text: str) -> list[str]:
    """Lowercased alphanumeric words of ``text``, stopwords removed (``"Ed Wood's"`` -> ``["ed", "wood", "s"]``)."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


# ---------------------------------------------------------------------------------------------
# retrieve


class Bm25Retriever:
    """Node ``retrieve``: rank the case's paragraphs by BM25 against the question, keep the top k.

    Each paragraph is indexed as its title (repeated ``title_weight`` times, since HotpotQA
    questions name the entities whose pages hold the answer) followed by its text. Ties keep
    the source order.

    Args:
        k: Paragraphs to keep (>= 1).
        title_weight: Times the title's words count in the paragraph's document.

    Input: ``{"question": str, "paragraphs": [{"title": str, "text": str}, ...]}``.
    Output: ``{"question": str, "citations": [title, ...], "paragraphs": [{"title", "text",
    "score"}, ...]}``, best first, ``len <= k``; ``score`` is the BM25 score (unbounded, >= 0
    with BM25Okapi's idf floor).

    Raises:
        ValueError: ``k < 1``.
    """

    name = "retrieve"

    def __init__(self, k: int, title_weight: int = 2) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k
        self.title_weight = title_weight

    def run(self, input: dict[str, Any]) -> dict[str, Any]:
        """Rank and cut; see the class docstring for the shapes."""
        question: str = _input_field(input, "question", str)
        paragraphs: list[dict[str, Any]] = list(_input_field(input, "paragraphs", list))
        if not paragraphs:
            return {"question": question, "citations": [], "paragraphs": []}
        docs = [tokenize(" ".join([p["title"]] * self.title_weight + [p["text"]])) for p in paragraphs]
        # BM25Okapi divides by the average document length, so an all-empty corpus needs a guard.
        scores = BM25Okapi(docs).get_scores(tokenize(question)) if any(docs) else [0.0] * len(docs)
        order = sorted(range(len(paragraphs)), key=lambda i: (-float(scores[i]), i))[: self.k]
        kept = [
            {"title": paragraphs[i]["title"], "text": paragraphs[i]["text"], "score": round(float(scores[i]), 4)}
            for i in order
        ]
        return {"question": question, "citations": [p["title"] for p in kept], "paragraphs": kept}


# ---------------------------------------------------------------------------------------------
# answer

_AUX = frozenset("are is was were do does did can could has have had will would should".split())
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(
    rf"\b(?:(?:{_MONTHS})\s+\d{{1,2}},\s+\d{{4}}|\d{{1,2}}\s+(?:{_MONTHS})\s+\d{{4}}|(?:{_MONTHS})\s+\d{{4}})\b"
)
_NUMBER = re.compile(r"\b\d{1,3}(?:,\d{3})+\b|\b\d+(?:\.\d+)?(?:\s+(?:million|billion|thousand))?\b")
# A name: capitalised words, allowing short joiners inside ("Chief of Protocol", "Jr.").
_NAME = re.compile(
    r"(?:[A-Z][\w'’.\-]*|\d+[\w]*)(?:\s+(?:(?:of|de|du|von|van|the|and|la|le|&)\s+)?(?:[A-Z][\w'’.\-]*|\d+\w*))*"
)
_OLDER = frozenset("older oldest earlier earliest first before".split())
_YOUNGER = frozenset("younger youngest later latest last recent newer after".split())


def _split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _bare_title(title: str) -> str:
    """A title without its disambiguation: ``"Ed Wood (film)"`` -> ``"Ed Wood"``."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title).strip()


def _stem(word: str) -> str:
    # A crude prefix stem so "composer"/"composers" and "genus"/"genera" meet.
    return word[:5]


@dataclass(frozen=True, slots=True)
class _Question:
    text: str
    words: list[str]
    terms: set[str]

    @classmethod
    def parse(cls, text: str) -> "_Question":
        words = _WORD.findall(text.lower())
        return cls(text=text, words=words, terms=set(tokenize(text)))

    @property
    def is_yes_no(self) -> bool:
        return bool(self.words) and self.words[0] in _AUX and "or" not in self.words

    @property
    def wants(self) -> str:
        """The answer type the question word asks for: ``date``, ``year``, ``number`` or ``name``."""
        text = " ".join(self.words)
        if re.search(r"\b(what|which|in what|in which) year\b|\bwhat years\b", text):
            return "year"
        if re.search(r"\bhow (many|any|much)\b|\bpopulation\b", text):
            return "number"
        if re.search(r"^when\b|\bwhen\b.*\bborn\b|\bwhen$", text):
            return "date"
        return "name"


class ExtractiveAnswerer:
    """Node ``answer``: a deterministic extractive answer from the retrieved paragraphs.

    Rules, in order:

    1. *Yes/no* (the question starts with an auxiliary verb and offers no "or"): take the two
       best paragraphs as the two entities. "... the same X?" -> ``yes`` when their first
       sentences share a capitalised word (e.g. a nationality) that neither title holds;
       otherwise (e.g. "both ... composers?") -> ``yes`` when each paragraph holds at least
       half of the question's remaining terms (prefix-stemmed).
    2. *Choice* (two kept paragraphs' titles are named in the question, and it says "or"):
       by the earliest/latest year in each paragraph for older/younger-style questions,
       else the paragraph that holds more of the remaining question terms; the answer is that
       paragraph's title.
    3. *Span*: score every sentence of the kept paragraphs by idf-weighted overlap with the
       question. For a name, first look in the best sentences for the title of a kept page
       the question does not name (the bridge entity); else take the first span of the
       wanted type (a date, a year, a number, or a capitalised name) that the question does
       not already contain.

    Input: the ``retrieve`` output. Output: ``{"answer": str, "citations": [title, ...],
    "rule": "yes_no" | "choice" | "span" | "none"}``.
    """

    name = "answer"

    def run(self, input: dict[str, Any]) -> dict[str, Any]:
        """Answer; see the class docstring for the shapes."""
        question = _Question.parse(_input_field(input, "question", str))
        paragraphs: list[dict[str, Any]] = _input_field(input, "paragraphs", list)
        citations = list(input.get("citations") or [p["title"] for p in paragraphs])
        answer, rule = "", "none"
        if paragraphs:
            if question.is_yes_no and len(paragraphs) >= 2:
                answer, rule = _yes_no(question, paragraphs[:2]), "yes_no"
            else:
                choice = _choice(question, paragraphs)
                if choice is not None:
                    answer, rule = choice, "choice"
                else:
                    span = _span(question, paragraphs)
                    if span:
                        answer, rule = span, "span"
        return {"answer": answer, "citations": citations, "rule": rule}


def _first_sentence(paragraph: dict[str, Any]) -> str:
    sentences = _split_sentences(paragraph["text"])
    return sentences[0] if sentences else ""


def _remaining_terms(question: _Question, paragraphs: Sequence[dict[str, Any]]) -> set[str]:
    """Question terms that are not the entities' names (what is asked *about* them)."""
    named = {w for p in paragraphs for w in tokenize(p["title"])}
    return {_stem(t) for t in question.terms - named - {"both", "same", "also"}}


def _yes_no(question: _Question, pair: Sequence[dict[str, Any]]) -> str:
    if "same" in question.words:
        caps = []
        for p in pair:
            title_words = set(_WORD.findall(p["title"].lower()))
            found = re.findall(r"\b[A-Z][a-z]+\b", _first_sentence(p))
            caps.append({w for w in found[1:] if w.lower() not in title_words and w.lower() not in STOPWORDS})
        return "yes" if caps[0] & caps[1] else "no"
    wanted = _remaining_terms(question, pair)
    if not wanted:
        return "yes"
    for p in pair:
        have = {_stem(w) for w in tokenize(p["text"])}
        if len(wanted & have) * 2 < len(wanted):
            return "no"
    return "yes"


def _choice(question: _Question, paragraphs: Sequence[dict[str, Any]]) -> str | None:
    if "or" not in question.words:
        return None
    lowered = question.text.lower()
    named: dict[str, dict[str, Any]] = {}
    for p in paragraphs:  # best first, so "Keith Bostic" beats a lower-ranked "Keith Bostic (American football)"
        bare = _bare_title(p["title"]).lower()
        if bare in lowered:
            named.setdefault(bare, p)
    if len(named) < 2:
        return None
    # The two options in the order the question names them, joined by "or" ("X or Y", "X, or the Y").
    pair = sorted(named.values(), key=lambda p: lowered.index(_bare_title(p["title"]).lower()))[:2]
    first, second = (_bare_title(p["title"]).lower() for p in pair)
    between = lowered[lowered.index(first) + len(first) : lowered.index(second)]
    if not re.fullmatch(r"\W*or\W+(?:the\W+)?", between):
        return None
    words = set(question.words)
    if words & (_OLDER | _YOUNGER):
        years = [min((int(y) for y in _YEAR.findall(p["text"])), default=None) for p in pair]
        if None not in years and years[0] != years[1]:
            earliest = 0 if years[0] < years[1] else 1  # type: ignore[operator]
            pick = earliest if words & _OLDER else 1 - earliest
            return _bare_title(pair[pick]["title"])
    wanted = _remaining_terms(question, pair)
    overlap = [len(wanted & {_stem(w) for w in tokenize(p["text"])}) for p in pair]
    return _bare_title(pair[1 if overlap[1] > overlap[0] else 0]["title"])


def _usable(candidate: str, question: _Question) -> bool:
    """A span worth answering: it says something (not just "It" / "The") the question does not."""
    terms = tokenize(candidate)
    if not terms:
        return False
    if len(terms) == 1 and _YEAR.fullmatch(terms[0]) and question.wants == "number":
        return False  # "how many" wants a count, and a bare year is almost never one
    known = sum(t in question.terms for t in terms)
    return known * 2 < len(terms)


def _span(question: _Question, paragraphs: Sequence[dict[str, Any]]) -> str:
    sentences = [(s, rank) for rank, p in enumerate(paragraphs) for s in _split_sentences(p["text"])]
    if not sentences:
        return ""
    tokens = [set(tokenize(s)) for s, _ in sentences]
    # Inverse sentence frequency: a rare shared word says more than a common one.
    df = Counter(w for ts in tokens for w in ts)
    total = len(sentences)

    def weight(word: str) -> float:
        return 1.0 + total / (1 + df[word])

    ranked = sorted(
        range(total),
        key=lambda i: (-sum(weight(w) for w in tokens[i] & question.terms), sentences[i][1], i),
    )
    pattern = {"date": _DATE, "year": _YEAR, "number": _NUMBER, "name": _NAME}[question.wants]
    if question.wants == "name":
        # A kept page the question does not name, mentioned where the question's words are, is
        # the likeliest answer entity (the second hop of a bridge question).
        lowered = question.text.lower()
        pages = [_bare_title(p["title"]) for p in paragraphs]
        pages = [t for t in pages if t.lower() not in lowered and _usable(t, question)]
        for i in ranked[:5]:
            for page in pages:
                if page in sentences[i][0]:
                    return page
    for i in ranked[:5]:
        for match in pattern.finditer(sentences[i][0]):
            candidate = match.group(0).strip(" .,'’")
            # A lone capitalised word opening a sentence is mostly just capitalised ("During", "Many").
            if match.start() == 0 and question.wants == "name" and " " not in candidate:
                continue
            if _usable(candidate, question):
                return candidate
    if question.wants == "date":
        # No full date near the question's words: fall back to a year.
        for i in ranked[:5]:
            found = _YEAR.search(sentences[i][0])
            if found:
                return found.group(0)
    return ""


# ---------------------------------------------------------------------------------------------
# answer scorers (HotpotQA's official answer metrics)


def normalize_answer(text: str) -> str:
    """SQuAD/HotpotQA answer normalisation: lowercase, drop punctuation and articles, squash spaces.

    Source: ``normalize_answer`` in hotpotqa/hotpot ``hotpot_evaluate_v1.py`` (itself from the
    SQuAD v1.1 evaluation script, Rajpurkar et al. 2016).
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def answer_f1(prediction: str, gold: str) -> float:
    """Token F1 between two answers after :func:`normalize_answer`, in 0..1.

    As in hotpotqa/hotpot ``hotpot_evaluate_v1.py`` ``f1_score``: a ``yes`` / ``no`` /
    ``noanswer`` on either side scores 0 unless both are equal; otherwise F1 = 2PR/(P+R) over
    the multiset of shared tokens (P = shared / predicted tokens, R = shared / gold tokens).
    """
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    special = ("yes", "no", "noanswer")
    if (pred in special or ref in special) and pred != ref:
        return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    same = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def _field(value: Any, name: str) -> str:
    if isinstance(value, dict):
        value = value.get(name)
    if value is None:
        raise ValueError(f"no {name!r} to score")
    return value if isinstance(value, str) else str(value)


@register
@dataclass
class AnswerEM(Scorer):
    """Exact match of normalised answers (HotpotQA ``exact_match_score``): pass/fail.

    Options: ``field``, the key holding the answer in a dict output and a dict expected
    (plain strings are used as they are).
    """

    name: ClassVar[str] = "answer_em"
    version: ClassVar[str] = "1"
    field: str = "answer"

    async def score(self, ctx: ScoreContext) -> Score:
        pred, gold = _field(ctx.output, self.field), _field(ctx.case.expected, self.field)
        ok = normalize_answer(pred) == normalize_answer(gold)
        return Score(self.name, ok, passed=ok, explanation=None if ok else f"{pred!r} != {gold!r}")


@register
@dataclass
class AnswerF1(Scorer):
    """Token F1 of normalised answers (HotpotQA ``f1_score``), a 0..1 measurement.

    Options: ``field`` as for ``answer_em``; ``threshold``, when set, turns the score into a
    verdict (passed when F1 >= threshold); unset, the score only measures.
    """

    name: ClassVar[str] = "answer_f1"
    version: ClassVar[str] = "1"
    field: str = "answer"
    threshold: float | None = None

    async def score(self, ctx: ScoreContext) -> Score:
        pred, gold = _field(ctx.output, self.field), _field(ctx.case.expected, self.field)
        f1 = answer_f1(pred, gold)
        passed = None if self.threshold is None else f1 >= self.threshold
        return Score(self.name, f1, passed=passed, explanation=f"{pred!r} vs {gold!r}")


# ---------------------------------------------------------------------------------------------
# targets

VARIANTS: dict[str, int] = {"top2": 2, "top4": 4}
"""Variant label -> paragraphs kept by ``retrieve``."""


def make_pipeline(k: int) -> Pipeline:
    """The retrieve -> answer pipeline keeping ``k`` paragraphs."""
    return Pipeline([Bm25Retriever(k), ExtractiveAnswerer()], name=f"hotpotqa-bm25-top{k}")


# Gold citations are expected["supporting_titles"]. Titles are whole ids: prefix matching (meant
# for shortened UUIDs) would count "Keith Bostic" as "Keith Bostic (American football)", so a
# minimum prefix longer than any title turns it off. Passes when both gold pages are cited
# (recall >= 0.6 of 2) with precision >= 0.4 (the scorer's defaults).
CITATION_SCORER: dict[str, Any] = {
    "name": "citation_set",
    "args": {"expected_field": "supporting_titles", "min_prefix": 1000},
}

hotpotqa_retrieve = TargetSpec(
    input_kind="json",
    id="hotpotqa-retrieve",
    variants={label: Bm25Retriever(k) for label, k in VARIANTS.items()},
    default_variant="top2",
    scorers=[CITATION_SCORER],
    description="HotpotQA dev: BM25 paragraph retrieval alone, cited titles vs gold supporting titles",
    default_set="../sets/hotpotqa_dev100.jsonl",
)

hotpotqa_agent = TargetSpec(
    input_kind="json",
    id="hotpotqa-agent",
    variants={label: as_agent(make_pipeline(k), name=f"hotpotqa-{label}") for label, k in VARIANTS.items()},
    default_variant="top2",
    scorers=["answer_em", "answer_f1"],
    description="HotpotQA dev: BM25 retrieve -> extractive answer (no LLM), scored by answer EM and F1",
    default_set="../sets/hotpotqa_dev100.jsonl",
)
