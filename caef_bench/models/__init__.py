"""Model tiers (tiny, smollm2-135m, llama-3.1-8b), the CAEF tokenizer, positions and decoding."""
