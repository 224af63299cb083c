"""Demo corpus and the queries ``make demo`` runs."""
