"""LoRA training of CAEF executors and aligners (and the tiny tier's base)."""
