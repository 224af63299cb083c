"""GraphStore backends, one module each."""
