"""``{% result_row result %}`` and ``{% compare_row row %}``: one row of a run's case table and
of the compare page's, built in Python.

The run page shows 50 rows; through the template engine each row cost about 55 variable
lookups, three ``{% url %}`` tags and three ``{% include %}`` of the preview cell, most of the
page's server time (issue 30, floor 5). This builds the same ``<tr>`` (the same cells, classes,
links and escaping as the ``result_row`` partial of ``evals/run_detail.html`` and the rows of
``evals/compare.html`` had) with :func:`django.utils.html.format_html`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from django import template
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from apps.evals.templatetags.evals_tags import ms, num, pill, score_class, score_value

register = template.Library()

_DASH = mark_safe('<span class="muted">—</span>')


def _preview(p: Any) -> SafeString:
    """One preview cell's content (was ``evals/_preview.html``)."""
    if not p or p.empty:
        return _DASH
    if p.expands:
        return format_html(
            '<details class="preview"><summary>{}</summary><pre class="text">{}{}</pre></details>',
            p.summary,
            p.text,
            "…" if p.cut else "",
        )
    return format_html('<span class="preview">{}</span>', p.summary)


def _prefix(context: template.Context, name: str, *args: Any, cut: bool = True) -> str:
    """The URL of ``name`` with a last int argument of 1, less that ``1/``: a prefix to append an
    id to (``cut=False``: the URL of ``name`` with ``args``); reversed once per page."""
    render_context: Any = context.render_context  # typed for the engine's own keys only
    cache: dict[tuple[Any, ...], str] = render_context.setdefault("result_row_prefixes", {})
    key = (name, cut, *args)
    if key not in cache:
        cache[key] = reverse(name, args=[*args, 1])[: -len("1/")] if cut else reverse(name, args=args)
    return str(cache[key])


@register.simple_tag(takes_context=True)
def result_row(context: template.Context, result: Any) -> SafeString:
    """The ``<tr id="<row_prefix>result-<id>">`` of ``result`` (``run`` joined; ``preview`` and
    ``conversation`` read when set). Context: ``eval_run``, ``case_qs`` (the filter kept on
    case links), ``show_previews``, ``row_prefix``."""
    eval_run = context["eval_run"]
    case_qs = context.get("case_qs") or ""
    query = f"?{case_qs}" if case_qs else ""
    case_url = f"{_prefix(context, 'evals:result', eval_run.pk)}{result.id}/{query}"
    case_cell = format_html(
        '<a class="row-link" href="{0}" hx-get="{0}" hx-target="#content" hx-push-url="true">{1}</a>',
        case_url,
        result.case_id,
    )
    if result.repeat_index:
        case_cell += format_html(' <span class="muted">#{}</span>', result.repeat_index)
    conversation = getattr(result, "conversation", None)
    if conversation:
        turns = conversation.n_turns
        case_cell += format_html(
            '\n      <span class="case-kind muted">conversation · {} turn{}</span>', turns, "" if turns == 1 else "s"
        )
        if conversation.first_failing and result.status != "passed":
            case_cell += format_html(
                ' · <a class="first-failing-link" href="{}#turn-{}">first failing turn {}</a>',
                case_url,
                conversation.first_failing,
                conversation.first_failing,
            )
    previews = SafeString("")
    if context.get("show_previews"):
        p = getattr(result, "preview", None)
        previews = format_html(
            '<td class="preview-cell">{}</td><td class="preview-cell">{}</td><td class="preview-cell">{}</td>',
            _preview(p.input if p else None),
            _preview(p.expected if p else None),
            _preview(p.output if p else None),
        )
    scores = _scores(result.scores)
    run = result.run
    tokens = "—" if run.tokens_in is None else f"{run.tokens_in}→{run.tokens_out or 0}"
    history = reverse("evals:case_history", args=[eval_run.eval_set_id, result.case_id])
    return format_html(
        '<tr id="{}result-{}">\n'
        '    <td class="mono">{}</td>\n'
        '    <td><span class="pill {}">{}</span></td>\n'
        "    {}\n"
        '    <td class="num">{}</td>\n'
        "    <td>{}</td>\n"
        "    <td>{}</td>\n"
        '    <td class="num">{}</td>\n'
        '    <td class="num">{}</td>\n'
        '    <td class="nowrap"><a href="{}{}/">trace</a> · <a class="history-link" href="{}" '
        'title="every run that scored this case">history</a></td>\n'
        "  </tr>",
        context.get("row_prefix") or "",
        result.id,
        case_cell,
        pill(result.status),
        result.status,
        previews,
        num(result.score),
        scores,
        result.split or "—",
        ms(run.elapsed_ms),
        tokens,
        _prefix(context, "traces:detail"),
        result.run_id,
        history,
    )


def _scores(scores: Any) -> SafeString:
    return mark_safe(  # each part is built by format_html
        "".join(
            format_html(
                '<span class="pill {}" title="{}">{} {}</span> ',
                score_class(s),
                s.get("explanation") or s.get("error") or "",
                s.get("name"),
                score_value(s),
            )
            for s in scores or []
        )
    )


_CHANGE = {
    "regression": mark_safe('<span class="pill pill-red">pass → fail</span>'),
    "improvement": mark_safe('<span class="pill pill-green">fail → pass</span>'),
}


@register.simple_tag(takes_context=True)
def compare_row(context: template.Context, row: Any) -> SafeString:
    """The ``<tr>`` of one aligned case of the compare page (a
    :class:`~apps.evals.queries.compare.CompareRow`, its results' ``preview`` and
    ``conversation`` read when set). Context: ``view`` (the
    :class:`~apps.evals.queries.compare.CompareView`)."""
    view = context["view"]
    a, b = row.a, row.b
    only = f"&only={view.only}" if view.only else ""
    side_by_side = (
        f"{_prefix(context, 'evals:compare_case', cut=False)}?a={view.run_a.pk}&b={view.run_b.pk}"
        f"&case={quote(row.case_id, safe='/')}&repeat={row.repeat_index}{only}"
    )
    case_cell = format_html(
        '<a class="row-link" href="{}" title="A and B side by side">{}</a>', side_by_side, row.case_id
    )
    if row.repeat_index:
        case_cell += format_html(" #{}", row.repeat_index)
    conversation = getattr(a, "conversation", None)
    if conversation:
        turns = conversation.n_turns
        case_cell += format_html(
            ' <span class="case-kind muted">conversation · {} turn{}</span>', turns, "" if turns == 1 else "s"
        )
    pa, pb = getattr(a, "preview", None), getattr(b, "preview", None)
    history = reverse("evals:case_history", args=[view.run_a.eval_set_id, row.case_id])
    return format_html(
        '<tr class="{}">\n'
        '      <td class="mono">{}</td>\n'
        '      <td>{} <a class="history-link muted" href="{}" '
        'title="every run that scored this case">history</a></td>\n'
        '      <td><a href="{}{}/"><span class="pill {}">{}</span></a></td>\n'
        '      <td><a href="{}{}/"><span class="pill {}">{}</span></a></td>\n'
        '      <td class="preview-cell">{}</td>\n'
        '      <td class="preview-cell">{}</td>\n'
        '      <td class="preview-cell">{}</td>\n'
        '      <td class="preview-cell">{}</td>\n'
        '      <td class="num">{}</td><td class="num">{}</td>\n'
        '      <td class="num">{}</td>\n'
        "      <td>{}</td>\n"
        "    </tr>",
        row.kind,
        case_cell,
        _CHANGE.get(row.kind, mark_safe('<span class="muted">same</span>')),
        history,
        _prefix(context, "evals:result", view.run_a.pk),
        a.id,
        pill(a.status),
        a.status,
        _prefix(context, "evals:result", view.run_b.pk),
        b.id,
        pill(b.status),
        b.status,
        _preview(pa.input if pa else None),
        _preview(pb.expected if pb else None),
        _preview(pa.output if pa else None),
        _preview(pb.output if pb else None),
        num(a.score),
        num(b.score),
        "—" if row.score_delta is None else num(row.score_delta, 3),
        _scores(b.scores),
    )
