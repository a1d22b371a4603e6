"""Private helpers of the engine with no idea of their own to live under: daemon threads for
blocking calls (``threads``), eager coroutine starts (``eager``), lazy package exports (``lazy``).

Nothing outside ``evalcore`` imports from here."""
