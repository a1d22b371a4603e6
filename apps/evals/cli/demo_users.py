"""The local demo accounts (``evalsite demo_users`` creates them, ``evalsite serve`` names
them): user name, password, what the role may do. For a local demo only."""

from __future__ import annotations

DEMO_USERS = (
    ("admin", "admin", "staff: authors sets and cases in the admin"),
    ("member", "member", "member: reads, starts runs, uses the playground"),
    ("viewer", "viewer", "viewer: reads"),
)
