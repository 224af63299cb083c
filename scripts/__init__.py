"""Developer and CI helpers that are not part of the service (servers for tests)."""
