"""`caef-bench serve`: CAEF behind an OpenAI-compatible server (docs/serving.md)."""

from __future__ import annotations

import argparse


def register(commands) -> None:
    from .common import backend_arguments, solver_arguments

    serve = commands.add_parser(
        "serve", help="CAEF as an OpenAI-compatible server: /v1/models, /v1/completions, /v1/chat/completions "
                      "(docs/serving.md)")
    solver_arguments(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--batch-size", type=int,
                       help="cap the prompts of one model call (default: every prompt the runtime has ready at once)")
    backend_arguments(serve)
    serve.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from caef_bench.serve.server import serve

    from .common import say, step_model

    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be 1-65535, not {args.port}")
    serve(step_model(args), args.tier, host=args.host, port=args.port, batch_size=args.batch_size,
          checkpoints=args.checkpoints, say=say)
    return 0
