"""Authoring in the admin: sets and cases (editable, bulk actions, case-bank upload).

The upload goes through the same loader and import service as the CLI (``evalcore.loaders
.load_cases``, reading the uploaded file object itself, then ``cases.import_cases``), so the
messages name the same file, line and field, and a bad file imports nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db import transaction
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from apps.core.storable import case_bank_nul_refusal, utf8_encodable
from apps.evals.exports.pairs import case_rows
from apps.evals.models import EvalCase, EvalSet, Split
from apps.evals.queries.sets import split_counts
from apps.evals.queries.tags import has_tag
from apps.evals.sets import cases
from apps.evals.sets.case_edits import CaseShapeError, check_case_values
from apps.evals.sets.tag_text import TagsTextField, tags_as_text
from evalcore.conversations import is_conversation_input
from evalcore.loaders import CaseBankError, CaseBankErrors, load_cases, nul_at, surrogate_at
from evalcore.splits import assign_split, parse_split_aliases, parse_split_ratios
from evalcore.tables import CONTENT_TYPES, jsonl_chunks

UPLOAD_MAX_ERRORS = 20
"""How many problems an admin upload reports at once (the loader stops looking after that)."""


class UploadForm(forms.Form):
    """A case bank file for a set (new or existing: the set then holds exactly the file's cases)."""

    name = forms.CharField(max_length=200, label="set name", help_text="an existing set is replaced by the file")
    file = forms.FileField(help_text=".jsonl, .json or .csv (optionally .gz), or an ADK .test.json / .evalset.json")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    split_ratios = forms.CharField(initial="60/20/20", help_text="train/dev/test shares for cases without a split")
    split_aliases = forms.CharField(
        required=False, help_text="map the file's split names, e.g. test=dev,validate=test (unknown names are refused)"
    )


@admin.register(EvalSet)
class EvalSetAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in the stubs only
    list_display = ("name", "case_count", "content_hash_short", "updated", "cases_link")
    search_fields = ("name", "description")
    # The change page never inlines the cases (a set can hold 100,000: rs-08, 1,319 cases made
    # the form too big to save): it links to the case list filtered on the set instead.
    readonly_fields = ("cases_by_split", "content_hash", "split_aliases", "created", "updated")
    change_list_template = "evals/admin_evalset_changelist.html"
    list_per_page = 50

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvalSet]:
        sets_with_counts: QuerySet[EvalSet] = super().get_queryset(request).annotate(n_cases=Count("cases"))
        return sets_with_counts

    @admin.display(description="cases", ordering="n_cases")
    def case_count(self, obj: EvalSet) -> int:
        count: int = getattr(obj, "n_cases", 0)  # annotated by get_queryset
        return count

    @admin.display(description="cases")
    def cases_by_split(self, obj: EvalSet) -> str:
        """Per-split counts and a link to the case list filtered on this set (never the rows)."""
        if obj.pk is None:
            return "—"
        counts = split_counts(obj)
        url = reverse("admin:evals_evalcase_changelist") + f"?eval_set__id__exact={obj.pk}"
        return format_html(
            '{} cases ({}) · <a href="{}">browse and edit the cases of this set</a>',
            f"{sum(counts.values()):,}",
            ", ".join(f"{split} {n:,}" for split, n in counts.items()),
            url,
        )

    @admin.display(description="hash")
    def content_hash_short(self, obj: EvalSet) -> str:
        return obj.content_hash[:12]

    @admin.display(description="")
    def cases_link(self, obj: EvalSet) -> str:
        url = reverse("admin:evals_evalcase_changelist") + f"?eval_set__id__exact={obj.pk}"
        return format_html(
            '<a href="{}">edit cases</a> · <a href="{}?name={}">upload</a>', url, self._upload_url(), obj.name
        )

    def _upload_url(self) -> str:
        return reverse("admin:evals_evalset_upload")

    def get_urls(self) -> list[Any]:
        custom = [path("upload/", self.admin_site.admin_view(self.upload_view), name="evals_evalset_upload")]
        return custom + super().get_urls()

    def upload_view(self, request: HttpRequest) -> HttpResponse:
        """Upload a case bank: validate the whole file, then import it in one transaction."""
        if not self.has_add_permission(request) or not self.has_change_permission(request):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        form = UploadForm(request.POST or None, request.FILES or None, initial={"name": request.GET.get("name", "")})
        if request.method == "POST" and form.is_valid():
            summary = self._import(request, form)
            if summary is not None:
                self.message_user(
                    request,
                    f"Imported {summary.eval_set.name}: {summary.created} created, {summary.updated} updated, "
                    f"{summary.removed} removed; splits {summary.split_counts}",
                    messages.SUCCESS,
                )
                return redirect("admin:evals_evalset_change", summary.eval_set.pk)
        context = {
            **self.admin_site.each_context(request),
            "form": form,
            "title": "Upload a case bank",
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "evals/admin_upload.html", context, status=400 if form.errors else 200)

    def _import(self, request: HttpRequest, form: UploadForm) -> cases.ImportSummary | None:
        upload = form.cleaned_data["file"]
        filename = Path(upload.name).name or "upload.jsonl"
        try:
            ratios = parse_split_ratios(form.cleaned_data["split_ratios"])
        except ValueError as exc:
            form.add_error("split_ratios", str(exc))
            return None
        try:
            aliases = parse_split_aliases(form.cleaned_data.get("split_aliases"))
        except ValueError as exc:
            form.add_error("split_aliases", str(exc))
            return None
        try:
            # The upload itself is read (no copy): its name gives the format, as a path's suffix does.
            bank = load_cases(
                upload,
                name=filename,
                set_name=form.cleaned_data["name"],
                split_ratios=ratios,
                max_errors=UPLOAD_MAX_ERRORS,
                split_aliases=aliases,
                forbid_nul=case_bank_nul_refusal(),
            )
        except CaseBankErrors as exc:
            # every problem (up to the limit), each naming line and field, so one upload fixes them all
            for problem in exc.errors:
                form.add_error("file", str(problem))
            if exc.truncated:
                form.add_error("file", f"stopped after {len(exc.errors)} problems; fix these and upload again")
            return None
        except CaseBankError as exc:
            form.add_error("file", str(exc))
            return None
        except ValueError as exc:
            form.add_error(None, str(exc))
            return None
        return cases.import_cases(
            name=form.cleaned_data["name"],
            cases=bank.cases,
            content_hash=bank.content_hash,
            source_path=f"upload:{filename}",
            description=form.cleaned_data["description"],
            split_ratios=ratios,
            hashed_splits=bank.hashed_splits,
            legacy_auto_ids=bank.legacy_auto_ids,
            split_aliases=aliases,
            user=request.user,
        )


class TagsForm(forms.Form):
    """The intermediate page of the add/remove tags actions."""

    tags = TagsTextField(required=True)


class TagFilter(admin.SimpleListFilter):
    """Filter cases by one tag (tags is a JSON list: match the quoted tag in its text)."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # Distinct tag lists are few even on large sets; cap the scan anyway.
        seen: set[str] = set()
        # order_by() drops the model's default ordering, which would make DISTINCT per row
        for tags in EvalCase.objects.order_by().values_list("tags", flat=True).distinct()[:1000]:
            seen.update(str(t) for t in tags or [])
        return [(t, t) for t in sorted(seen)[:200]]

    def queryset(self, request: HttpRequest, queryset: QuerySet[EvalCase]) -> QuerySet[EvalCase]:
        value = self.value()
        return queryset.filter(has_tag(value)) if value else queryset


class _EscapingEncoder(json.JSONEncoder):
    """The admin's JSON text, with a lone UTF-16 surrogate written as its ``\\udXXX`` escape: a
    refused value is shown again in the form, and a raw surrogate cannot be written in a page."""

    def encode(self, o: Any) -> str:
        text = super().encode(o)
        return text if utf8_encodable(text) else _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


class _IndentingEncoder(_EscapingEncoder):
    """:class:`_EscapingEncoder` writing indented JSON (a conversation case's turns, a line each)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["indent"] = 2
        super().__init__(*args, **kwargs)


CONVERSATION_HELP = (
    'A conversation case: {"turns": ["user message", ...], "initial_state": {...}}, with Expected a list of '
    'one {"final_response", "tool_calls", "rubric"} per turn (or {"turns": [...], "final_state": {...}}).'
)


class EvalCaseForm(forms.ModelForm):  # type: ignore[type-arg]  # generic in the stubs only
    """The case form: a NUL character (U+0000) in a JSON field is refused on every database, as
    Django's forms refuse it in text (PostgreSQL cannot store one: the save was a 500 there), and
    so is a lone UTF-16 surrogate (a ``"\\ud83d"`` escape in the JSON: no database can store it)."""

    # shown as "a, b, c" and saved as the list, parsed as the capture form parses it
    tags = TagsTextField()

    class Meta:
        model = EvalCase
        fields = "__all__"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("input", "expected", "metadata"):
            field = self.fields.get(name)
            if isinstance(field, forms.JSONField):
                field.encoder = _EscapingEncoder
        if "input" in self.fields:
            self.fields["input"].help_text = CONVERSATION_HELP
        if self.instance is not None and is_conversation_input(self.instance.input):
            # one turn a line: a conversation on one line is hard to read and to edit
            for name in ("input", "expected"):
                field = self.fields.get(name)
                if isinstance(field, forms.JSONField):
                    field.encoder = _IndentingEncoder

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for name in ("input", "expected", "tags", "metadata"):
            where = nul_at(cleaned.get(name))
            if where is not None:
                self.add_error(name, f"Null characters are not allowed (a NUL character, U+0000, at {name}{where}).")
                continue
            found = surrogate_at(cleaned.get(name))
            if found is not None:
                self.add_error(
                    name,
                    f"A lone UTF-16 surrogate (U+{ord(found[1]):04X}) at {name}{found[0]} is not text any "
                    "database can store: write the whole character (or its escaped pair).",
                )
        if not self.errors:
            self._check_conversation(cleaned)
        return cleaned

    def _check_conversation(self, cleaned: dict[str, Any]) -> None:
        """A conversation case (``{"turns": [...]}`` input, per-turn expected) must read as one, as
        the loaders and the API check it: the error names the JSON path (``input.turns[1]``)."""
        expected = cleaned.get("expected") if cleaned.get("has_expected", True) else None
        try:
            check_case_values(cleaned.get("input"), expected)
        except CaseShapeError as exc:
            root = (exc.field or "").split(".")[0].split("[")[0]
            self.add_error(root if root in ("input", "expected") else None, exc.message)


@admin.register(EvalCase)
class EvalCaseAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # generic in the stubs only
    form = EvalCaseForm
    list_display = ("case_id", "eval_set", "split", "tag_list", "position")
    list_filter = ("split", "eval_set", TagFilter)
    # No list_editable: a hundred rendered split <select>s were most of the list's server time at
    # 100,000 cases (bench/bench_admin.py); the "Assign split" actions move the selected cases.
    search_fields = ("case_id", "tags")
    list_select_related = ("eval_set",)
    # eval_set_id, not eval_set: ordering on the relation sorts on the set's name through a join,
    # the whole table each page; this order is the (eval_set, position) index's
    ordering = ("eval_set_id", "position", "case_id")
    list_per_page = 100
    show_full_result_count = False  # the filtered count is shown; a second count of every case is not

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvalCase]:
        qs = super().get_queryset(request)
        # the list shows ids, splits and tags: inputs and expected values can be large
        if request.resolver_match and request.resolver_match.url_name == "evals_evalcase_changelist":
            return qs.defer("input", "expected", "metadata")
        return qs

    actions = [
        "assign_train",
        "assign_dev",
        "assign_test",
        "resplit_by_hash",
        "add_tags",
        "remove_tags",
        "export_jsonl",
    ]

    @admin.display(description="tags")
    def tag_list(self, obj: EvalCase) -> str:
        return tags_as_text(obj.tags)

    def action_checkbox(self, obj: EvalCase) -> SafeString:
        """Django's row checkbox written directly: the stock one renders a form widget through the
        template engine per row, a third of the list's server time at 100 rows (the column's
        head, the select-all box, is Django's own)."""
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" '
            'aria-label="Select this object for an action - {}">',
            ACTION_CHECKBOX_NAME,
            obj.pk,
            str(obj),
        )

    def save_model(self, request: HttpRequest, obj: EvalCase, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        cases.refresh_set_hashes([obj.eval_set_id], source=f"admin: case {obj.case_id} edited", user=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[EvalCase]) -> None:
        set_ids = list(queryset.values_list("eval_set_id", flat=True).distinct())
        super().delete_queryset(request, queryset)
        cases.refresh_set_hashes(set_ids, source="admin: cases deleted", user=request.user)

    def _assign(self, request: HttpRequest, queryset: QuerySet[EvalCase], split: str) -> None:
        set_ids = list(queryset.values_list("eval_set_id", flat=True).distinct())
        n = queryset.update(split=split)
        cases.refresh_set_hashes(set_ids, source=f"admin: cases moved to {split}", user=request.user)
        self.message_user(request, f"{n} case{'s' if n != 1 else ''} moved to {split}", messages.SUCCESS)

    @admin.action(description="Assign split: train")
    def assign_train(self, request: HttpRequest, queryset: QuerySet[EvalCase]) -> None:
        self._assign(request, queryset, Split.TRAIN)

    @admin.action(description="Assign split: dev")
    def assign_dev(self, request: HttpRequest, queryset: QuerySet[EvalCase]) -> None:
        self._assign(request, queryset, Split.DEV)

    @admin.action(description="Assign split: test (held out)")
    def assign_test(self, request: HttpRequest, queryset: QuerySet[EvalCase]) -> None:
        self._assign(request, queryset, Split.TEST)

    @admin.action(description="Re-split by stable hash (60/20/20)")
    def resplit_by_hash(self, request: HttpRequest, queryset: QuerySet[EvalCase]) -> None:
        rows = list(queryset.select_related("eval_set").only("id", "case_id", "split", "eval_set__name"))
        changed = []
        for row in rows:
            split = assign_split(row.eval_set.name, row.case_id)
            if split != row.split:
                row.split = split
                changed.append(row)
        with transaction.atomic():
            EvalCase.objects.bulk_update(changed, ["split"], batch_size=500)
            cases.refresh_set_hashes({row.eval_set_id for row in changed}, source="admin: re-split", user=request.user)
        self.message_user(request, f"{len(changed)} of {len(rows)} cases changed split", messages.SUCCESS)

    def _tags_action(self, request: HttpRequest, queryset: QuerySet[EvalCase], remove: bool) -> HttpResponse | None:
        if "apply" in request.POST:
            form = TagsForm(request.POST)
            if form.is_valid():
                tags: list[str] = form.cleaned_data["tags"]
                rows = list(queryset.select_related(None).only("id", "tags", "eval_set_id"))
                for row in rows:
                    current = list(row.tags or [])
                    row.tags = (
                        [t for t in current if t not in tags]
                        if remove
                        else current + [t for t in tags if t not in current]
                    )
                with transaction.atomic():
                    EvalCase.objects.bulk_update(rows, ["tags"], batch_size=500)
                    cases.refresh_set_hashes({row.eval_set_id for row in rows}, source="admin: tags", user=request.user)
                verb = "removed from" if remove else "added to"
                self.message_user(request, f"tags {', '.join(tags)} {verb} {len(rows)} cases", messages.SUCCESS)
                return None
        else:
            form = TagsForm()
        context = {
            **self.admin_site.each_context(request),
            "title": "Remove tags" if remove else "Add tags",
            "form": form,
            "queryset": queryset[:50],
            "count": queryset.count(),
            "selected": request.POST.getlist(ACTION_CHECKBOX_NAME),
            "action": "remove_tags" if remove else "add_tags",
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "evals/admin_tags.html", context)

    @admin.action(description="Add tags…")
    def add_tags(self, request: HttpRequest, queryset: QuerySet[EvalCase]) -> HttpResponse | None:
        return self._tags_action(request, queryset, remove=False)

    @admin.action(description="Remove tags…")
    def remove_tags(self, request: HttpRequest, queryset: QuerySet[EvalCase]) -> HttpResponse | None:
        return self._tags_action(request, queryset, remove=True)

    @admin.action(description="Export as JSONL")
    def export_jsonl(self, request: HttpRequest, queryset: QuerySet[EvalCase]) -> StreamingHttpResponse:
        # the set export's records (apps.evals.exports.pairs), streamed; a whole set: its page's export
        rows = case_rows(queryset.order_by("eval_set", "position", "case_id"))
        response = StreamingHttpResponse(jsonl_chunks(rows), content_type=CONTENT_TYPES["jsonl"])
        response["Content-Disposition"] = 'attachment; filename="cases.jsonl"'
        return response
