"""Which model answers the runtime's calls: the tier in this process (`hf`), or any OpenAI-compatible
server (`openai`: `endpoint.EndpointStepModel`). The loop, batching, records and scoring are the same
for both; only the model call differs."""

from __future__ import annotations

BACKENDS = ("hf", "openai")


def step_model(backend: str = "hf", tier: str = "tiny", checkpoints: str | None = None, *,
               speculative: bool = True, device: str | None = None, base_url: str | None = None, ops=None,
               dtype: str | None = None):
    """The StepModel of a backend. hf: the tier's base, its adapters attached on first use; openai: the
    server at `base_url`, which serves each adapter under its name (docs/serving.md). `ops`: the
    operators about to be solved; an adapter one of them calls that the tier (or server) lacks is
    a MissingAdaptersError before any model runs (hf: before the base loads). `dtype`: the tier run in
    another torch dtype than its own (hf only)."""
    if backend == "hf":
        if base_url:
            raise ValueError("--base-url is for --backend openai (the local backend loads the tier itself)")
        from caef_bench.models.loading import default_device
        from caef_bench.runtime.hf import load_step_model

        return load_step_model(tier, checkpoints, speculative=speculative, device=default_device(device), ops=ops,
                               dtype=dtype)
    if backend == "openai":
        if not base_url:
            raise ValueError("--backend openai needs --base-url, the server's address (http://HOST:PORT/v1)")
        if checkpoints:
            raise ValueError("--checkpoints is for the local backend: an endpoint answers with the adapters it serves")
        if not speculative:
            raise ValueError("--no-speculative is for the local backend: an endpoint decodes as its server does")
        if dtype:
            raise ValueError("--dtype is for the local backend: an endpoint runs in its server's dtype")
        from caef_bench.runtime.endpoint import EndpointStepModel

        model = EndpointStepModel(base_url)
        if ops:
            check_operators(model, tier, ops)
        return model
    raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")


def check_operators(model, tier: str, ops) -> None:
    """models.limits.check_adapters for a step model of either backend: a MissingAdaptersError naming
    every adapter that problems of `ops` call and `model` cannot answer with (a tier's: how to train
    them; a server's: that it does not serve them)."""
    from caef_bench.models.limits import check_adapters

    server = getattr(model, "root", None)  # an endpoint's address
    folder = getattr(getattr(model, "tier", None), "adapters", None)
    check_adapters(tier, ops, getattr(model, "available_adapters", None), folder, server)


__all__ = ["BACKENDS", "check_operators", "step_model"]
