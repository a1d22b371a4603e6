"""A run's life up to the store: its typed parameters (:mod:`.config`), the plan every executor
runs (:mod:`.plan`) and the rules the command line obeys when it starts or resumes one
(:mod:`.options`)."""
