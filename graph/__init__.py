"""Knowledge graph: GraphStore protocol and backends, Leiden communities, community reports."""
