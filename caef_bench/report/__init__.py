"""Tables and plots: the paper's numbers beside ours."""
