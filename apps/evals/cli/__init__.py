"""What the commands share: database readiness, printing, the judge options, the queue executor."""
