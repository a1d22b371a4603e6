"""The evals JSON API: one router per area, its schemas beside it (mounted by ``evalsite.api``)."""
