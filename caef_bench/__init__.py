"""caef-bench: reproducibility and benchmark suite for CAEF (arXiv 2410.07896).

Importing the package is cheap on purpose: heavy stacks (torch, transformers,
peft) are imported only by the stages that need them.
"""

__version__ = "0.1.0"
