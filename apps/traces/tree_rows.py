"""The trace viewer's treegrid rows, rendered with Jinja2.

A 2,000-span trace is 2,000 rows of about twenty values each; the Django template language
spends ~20 µs per value (well over the page's 300 ms budget on a loaded 2-core machine), Jinja2
compiles the template to Python and renders the same rows several times faster. Only these rows
use it: the page around them stays a Django template (``traces/detail.html``), which inserts the
rows' HTML. Autoescape is on, as everywhere in the portal: every value is escaped (a trace's
names and ids come from its producer); it costs ~10 ms at 2,000 spans (``bench/bench_trace_page.py``,
min 104 → 116 ms), well inside the budget.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2
from django.utils.safestring import SafeString, mark_safe

from apps.traces.queries import SpanTree


def ms(value: Any) -> str:
    """Milliseconds, humanised as the portal's ``ms`` filter does: ``840 ms`` / ``2.4 s``; ``—`` for none."""
    if value is None:
        return "—"
    value = float(value)
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.1f} s"


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("apps.traces", "jinja2"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        auto_reload=False,
    )
    env.filters["ms"] = ms
    return env


def tree_rows(tree: SpanTree, selected_id: str | None) -> SafeString:
    """The ``<tr>`` rows of ``tree`` (ARIA ``aria-level`` / ``aria-expanded`` / ``aria-selected``,
    one ``tabindex="0"`` row: the selected one), as HTML safe to insert."""
    template = _environment().get_template("traces/span_rows.html")
    return mark_safe(template.render(nodes=tree.rows, selected_id=selected_id))
