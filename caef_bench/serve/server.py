"""Start `caef-bench serve`: the app (`app.create_app`) under uvicorn, until SIGINT or SIGTERM."""

from __future__ import annotations

from pathlib import Path


def tier_tokenizer(tier: str, checkpoints: str | None = None):
    """A loader of the tier's tokenizer for /tokenize (called as the server starts); it gives None when the
    tier's base is not on this machine (a server in front of a remote endpoint)."""

    def load():
        from transformers import AutoTokenizer

        from caef_bench.models.loading import tier_with_checkpoints

        try:
            base = tier_with_checkpoints(tier, checkpoints).base
            return AutoTokenizer.from_pretrained(str(base), local_files_only=Path(str(base)).exists())
        except (OSError, ValueError):
            return None

    return load


def serve(model, tier: str, *, host: str = "127.0.0.1", port: int = 8000, batch_size: int | None = None,
          checkpoints: str | None = None, say=print) -> None:
    import uvicorn

    from .app import create_app, served_adapters

    def ready():
        say(f"caef-bench serve: caef-{tier} and {len(served_adapters(model))} adapters at http://{host}:{port}/v1 "
            "(adapters attached on first use; Ctrl-C stops)")

    app = create_app(model, tier, tokenizer=tier_tokenizer(tier, checkpoints), batch_size=batch_size, announce=ready)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


__all__ = ["serve", "tier_tokenizer"]
