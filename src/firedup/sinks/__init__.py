"""Where verdicts go: the terminal, JSON, the exit code."""
