"""The evals pages, one module per page group: :mod:`.eval_runs` (runs list, a run, one case),
:mod:`.compare`, :mod:`.sets` (sets, splits, trends), :mod:`.start` (start an eval run).

One function view per page, one template per page with named partials
(``apps.core.pages.render_page``: ``request.htmx`` picks the partial, the ``HX-Target`` names
which). Every page needs a login and the viewer role; starting a run needs the member role.
Reads come from :mod:`apps.evals.queries`.
"""

from __future__ import annotations

from django_htmx.middleware import HtmxDetails

from apps.core.access import AuthenticatedRequest


class HtmxHttpRequest(AuthenticatedRequest):
    """A page request as the middleware leaves it: a signed-in ``user`` and ``request.htmx``
    (``django_htmx``). Only for type checkers."""

    htmx: HtmxDetails
