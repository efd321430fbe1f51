"""The only place SQL lives."""
