"""Tables and plots: the paper's numbers beside ours.

Every Markdown report in results/ is written from its JSON document, and `report.render` writes it again
from that document alone (tests/test_results.py holds each committed report to it)."""
