"""Training data and the paper's test sets."""
