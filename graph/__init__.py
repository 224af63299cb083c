"""Knowledge graph: GraphStore protocol and backends, Leiden communities, reports (next)."""
