"""Scoring and failure analysis."""
