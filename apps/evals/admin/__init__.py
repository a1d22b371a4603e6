"""The evals admin: sets and cases (:mod:`.sets`), runs and results (:mod:`.runs`) and reviews
(:mod:`.reviews`); Django's autodiscovery imports this package, each module registers its own."""

from apps.evals.admin import reviews, runs, sets  # noqa: F401 - each registers its admin classes
