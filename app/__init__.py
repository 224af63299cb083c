"""The application layer: the composition root and the operations every door calls."""
