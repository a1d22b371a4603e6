"""Forms of the evals pages: GET filters validated like any input, and the start-run form."""

from __future__ import annotations

from typing import Any

from django import forms

from apps.core.forms import AsciiFloatField, AsciiIntegerField
from apps.evals.models import EvalRun, EvalRunStatus, EvalSet, ResultStatus, Split
from apps.evals.queries.compare import COMPARE_ONLY, CompareError, check_comparable
from apps.evals.queries.results import RESULT_ORDERS
from apps.evals.queries.run_table import SORT_LABELS
from evalcore.splits import ALL, SPLIT_CHOICES

SPLIT_FILTER = [("", "any split"), *[(s, s) for s in SPLIT_CHOICES]]


def _blank(label: str, values: Any) -> list[tuple[str, str]]:
    return [("", label), *[(v, v) for v in values]]


class PageField(AsciiIntegerField):
    """A 1-based page number; anything invalid means page 1 rather than an error page."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, min_value=1, **kwargs)

    def clean(self, value: Any) -> int:
        try:
            return super().clean(value) or 1
        except forms.ValidationError:
            return 1


class RunFilterForm(forms.Form):
    """Filters of the runs list (all optional)."""

    set = forms.ModelChoiceField(queryset=EvalSet.objects.all(), required=False, empty_label="any set")
    target = forms.CharField(required=False, max_length=200)
    variant = forms.CharField(required=False, max_length=200)
    split = forms.ChoiceField(choices=SPLIT_FILTER, required=False)
    status = forms.ChoiceField(choices=_blank("any status", EvalRunStatus.values), required=False)
    sort = forms.ChoiceField(choices=list(SORT_LABELS.items()), required=False)
    page = PageField()


class ResultFilterForm(forms.Form):
    """Filters of a run's case table."""

    status = forms.ChoiceField(choices=_blank("all cases", ResultStatus.values), required=False)
    q = forms.CharField(required=False, max_length=300, label="case id")
    order = forms.ChoiceField(
        choices=[("", "arrival"), ("-score", "score, high first"), ("score", "score, low first"), ("case", "case id")],
        required=False,
    )
    text = forms.CharField(required=False, max_length=300, label="text", help_text="words in input, expected or output")
    tag = forms.CharField(required=False, max_length=200)
    meta = forms.CharField(required=False, max_length=300, label="metadata", help_text="key=value")
    score_min = AsciiFloatField(required=False, min_value=0.0, max_value=1.0, label="score ≥")
    score_max = AsciiFloatField(required=False, min_value=0.0, max_value=1.0, label="score ≤")
    latency_min_ms = AsciiFloatField(required=False, min_value=0.0, label="ms ≥")
    latency_max_ms = AsciiFloatField(required=False, min_value=0.0, label="ms ≤")
    tokens_min = AsciiIntegerField(required=False, min_value=0, label="tokens ≥")
    tokens_max = AsciiIntegerField(required=False, min_value=0, label="tokens ≤")
    page = PageField()

    def clean_order(self) -> str:
        order = self.cleaned_data.get("order") or ""
        return order if order in RESULT_ORDERS else ""


class CompareForm(forms.Form):
    """Two runs of the same set (A = baseline, B = candidate) and the row filter."""

    a = forms.CharField(max_length=32, label="A (baseline)")
    b = forms.CharField(max_length=32, label="B (candidate)")
    only = forms.ChoiceField(choices=[("", "all shared cases"), *[(o, o) for o in COMPARE_ONLY]], required=False)
    page = PageField()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        runs: dict[str, EvalRun | None] = {}
        for key in ("a", "b"):
            if data.get(key):
                run = EvalRun.objects.select_related("eval_set").filter(pk=data[key]).first()
                if run is None:
                    self.add_error(key, f"no run {data[key]!r}")
                runs[key] = run
        run_a, run_b = runs.get("a"), runs.get("b")
        if run_a and run_b:
            try:
                check_comparable(run_a, run_b)
            except CompareError as exc:
                raise forms.ValidationError(str(exc)) from None
        data["run_a"], data["run_b"] = run_a, run_b
        return data


class CaseFilterForm(forms.Form):
    """Filters of a set's case browser."""

    split = forms.ChoiceField(choices=_blank("any split", Split.values), required=False)
    tag = forms.CharField(required=False, max_length=100)
    q = forms.CharField(required=False, max_length=300, label="case id")
    page = PageField()


class TrendsForm(forms.Form):
    """A set, a scorer (or the pass rate) and optionally a split."""

    set = forms.ModelChoiceField(queryset=EvalSet.objects.all(), required=False, empty_label="pick a set")
    scorer = forms.CharField(required=False, max_length=200)
    split = forms.ChoiceField(choices=SPLIT_FILTER, required=False)


class StartRunForm(forms.Form):
    """Start an eval run of a discovered target on a set and split."""

    eval_set = forms.ModelChoiceField(queryset=EvalSet.objects.all(), label="set")
    target = forms.ChoiceField(choices=[])
    variant = forms.CharField(required=False, max_length=200, help_text="a declared variant, or a free label")
    split = forms.ChoiceField(choices=[(s, s) for s in SPLIT_CHOICES], initial=Split.DEV)
    allow_test = forms.BooleanField(required=False, label="I am touching the held-out test split")
    name = forms.CharField(required=False, max_length=200, help_text="blank: set · target/variant · split · #n")
    simulator_model = forms.CharField(
        required=False, max_length=200, help_text="blank: none (scenario cases without a script are errored)"
    )
    simulator_base_url = forms.CharField(required=False, max_length=2000, help_text="blank: the judge's endpoint")
    simulator_seed = forms.IntegerField(required=False, min_value=0, help_text="blank: 0")

    def __init__(self, *args: Any, targets: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.targets = targets or {}
        target = self.fields["target"]
        assert isinstance(target, forms.ChoiceField)
        target.choices = [(tid, tid) for tid in self.targets]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        split = data.get("split")
        if split in (Split.TEST, ALL) and not data.get("allow_test"):
            self.add_error(
                "allow_test",
                f"split “{split}” includes the held-out test split: tick the box to run on it "
                "(every test-split run is counted)",
            )
        spec = self.targets.get(data.get("target") or "")
        variant = (data.get("variant") or "").strip()
        if spec is not None and spec.variants and variant and variant not in spec.variants:
            self.add_error(
                "variant", f"target {spec.id} has no variant {variant!r} (variants: {', '.join(spec.variants)})"
            )
        data["variant"] = variant
        if not (data.get("simulator_model") or "").strip():
            for name in ("simulator_base_url", "simulator_seed"):
                if data.get(name) not in (None, ""):
                    self.add_error(name, "needs a simulator model")
        return data
