"""Scoring, the suites (the repeated-digit study among them), systems and caef's lm-eval models."""
