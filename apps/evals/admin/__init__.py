"""The evals admin: sets and cases (:mod:`.sets`), runs and results (:mod:`.runs`), reviews
(:mod:`.reviews`), the price table (:mod:`.prices`) and the judge ledger (:mod:`.ledger`);
Django's autodiscovery imports this package, each module registers its own."""

from apps.evals.admin import ledger, prices, reviews, runs, sets  # noqa: F401 - each registers its admin classes
