"""`caef-bench serve`: CAEF as an OpenAI-compatible server (FastAPI), a door onto the one runtime.

    GET  /v1/models             caef-<tier> (a whole problem: "45+67=" in, "112" out) and every
                                adapter by its name (one step: a state text in, the next out)
    POST /v1/completions        prompt: a string or a list; model: caef-<tier> or an adapter
    POST /v1/chat/completions   model caef-<tier>: the expression in the last user message; the
                                reply ends with the line "Answer: 112" that the chat tasks read
    GET  /tokenizer_info, POST /tokenize, /detokenize   the tier's tokenizer (what lm-eval's
                                local-completions asks for before it needs no tokenizer of its own)
    GET  /health

Every problem of every request joins the same rounds (`scheduler.Scheduler`). Greedy only: a request
asking for sampling is a 400, as is one whose prompt is not an expression, whose operands are beyond
the tier's limits, or whose model is unknown, each with a one-line reason. A client that disconnects
has its problems dropped before the next round. (This module imports FastAPI: only `serve` loads it.)
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from caef_bench.machines import ALIGNED_OPS, EXECUTOR_OPS, parse_expression, routed, typed_expression
from caef_bench.machines.ops import BY_SYMBOL
from caef_bench.models.limits import BeyondTierError, check_lengths, check_within_tier, windowing
from caef_bench.models.names import aligner_name, executor_name
from caef_bench.runtime.backends import check_operators

from .scheduler import Scheduler

MAX_PROMPTS = 4096  # prompts in one request
MAX_PROMPT_CHARS = 200_000  # a 100-digit composer state is a few thousand characters
MAX_BODY_BYTES = 64 << 20
DISCONNECT_POLL_S = 0.25
# Any expression in a chat message: "The expression is: 45+67=." (longest symbols first: // and ==);
# failing that, one as a person writes it: "What is 12 + 34?".
_SYMBOL_PATTERN = "|".join(re.escape(s) for s in sorted(BY_SYMBOL, key=len, reverse=True))
_IN_TEXT = re.compile(r"(?<![0-9])[0-9]+(?:" + _SYMBOL_PATTERN + r")[0-9]+=")
_TYPED_IN_TEXT = re.compile(r"(?<![0-9])[0-9]+[ \t]*(?:" + _SYMBOL_PATTERN + r")[ \t]*[0-9]+(?![0-9])")


class BadRequest(Exception):
    """A request the server cannot answer as asked: 400 with this one-line reason."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


class ClientGone(Exception):
    """The client disconnected while its problems were in flight."""


class NoTokenizer(Exception):
    """The server was made without a tokenizer: its tokenizer endpoints answer 404."""


class ServerError(Exception):
    """The model failed on a request's problem or step: 500 with this one-line reason."""


def every_adapter() -> tuple[str, ...]:
    return tuple(sorted([*map(executor_name, EXECUTOR_OPS), *map(aligner_name, ALIGNED_OPS)]))


def served_adapters(model) -> tuple[str, ...]:
    """The adapters a step model answers with: those it names (a loaded tier), else every CAEF adapter."""
    names = getattr(model, "adapter_names", None)
    return tuple(names) if names else every_adapter()


# --------------------------------------------------------------------------- reading requests


_SAMPLING = {  # a field, and the values that still mean greedy decoding
    "temperature": lambda v: v is None or v == 0,
    "top_p": lambda v: v is None or v == 1,
    "top_k": lambda v: v is None or v in (-1, 0, 1),
    "min_p": lambda v: v is None or v == 0,
    "n": lambda v: v is None or v == 1,
    "best_of": lambda v: v is None or v == 1,
    "do_sample": lambda v: not v,
    "presence_penalty": lambda v: not v,
    "frequency_penalty": lambda v: not v,
    "repetition_penalty": lambda v: v is None or v == 1,
    "use_beam_search": lambda v: not v,
}
_UNSUPPORTED = {  # a field, when it asks for what this server does not do
    "stream": (lambda v: bool(v), "streaming is not supported; send stream=false"),
    "logprobs": (lambda v: v not in (None, False, 0), "logprobs are not supported (CAEF only generates)"),
    "top_logprobs": (lambda v: v not in (None, 0), "logprobs are not supported (CAEF only generates)"),
    "echo": (lambda v: bool(v), "echo is not supported (CAEF only generates)"),
    "suffix": (lambda v: bool(v), "suffix is not supported"),
    "logit_bias": (lambda v: bool(v), "logit_bias is not supported: it changes the greedy answer"),
}


def check_greedy(body: dict) -> None:
    for name, greedy in _SAMPLING.items():
        if name in body:
            try:
                ok = greedy(body[name])
            except TypeError:
                ok = False
            if not ok:
                raise BadRequest(f"greedy decoding only: {name}={body[name]!r} asks for sampling "
                                 f"(send temperature 0 or leave it out)", name)
    for name, (asks, reason) in _UNSUPPORTED.items():
        if asks(body.get(name)):
            raise BadRequest(reason, name)


def stop_strings(body: dict) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise BadRequest("stop must be a string or a list of strings", "stop")
    return [s for s in stops if s]


def cut_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    """The text up to the first stop string (OpenAI's rule), and whether one was found."""
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def prompts_of(body: dict) -> list[str]:
    prompt = body.get("prompt")
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(prompts, list) or not prompts:
        raise BadRequest("prompt must be a string or a non-empty list of strings", "prompt")
    if not all(isinstance(p, str) for p in prompts):
        raise BadRequest("prompts must be text, not token ids (lm-eval: tokenized_requests=False)", "prompt")
    if len(prompts) > MAX_PROMPTS:
        raise BadRequest(f"at most {MAX_PROMPTS} prompts per request, got {len(prompts)}", "prompt")
    for i, prompt in enumerate(prompts):
        if len(prompt) > MAX_PROMPT_CHARS:
            raise BadRequest(f"prompt {i} has {len(prompt)} characters; at most {MAX_PROMPT_CHARS}", "prompt")
    return prompts


def max_tokens_of(body: dict) -> int | None:
    value = body.get("max_tokens", body.get("max_completion_tokens"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"max_tokens must be a positive integer, not {value!r}", "max_tokens")
    return value


def _short(text: str, room: int = 60) -> str:
    return text if len(text) <= room else text[:room // 2 - 1] + "…" + text[-(room // 2 - 1):]


def expression_of(prompt: str, tier: str, where: str, model=None):
    """The expression a whole-problem prompt asks (as a person types it: "12 + 34" asks 12+34=), and the
    route it runs on, checked against the tier's limits and, given the step `model`, against the adapters
    it has (an operator it lacks is a 400 naming them): mul and div past the paper's limits run on the long
    route where the tier's limits and the model's adapters have it (models.limits.route_within_tier)."""
    try:
        text = typed_expression(prompt)
        check_lengths(tier, text)  # before the digits are read as numbers: a 5,000-digit operand names the limit
        expression = parse_expression(text)
    except BeyondTierError as error:
        raise BadRequest(f"{where}: {error}", "prompt") from None
    except ValueError as error:
        raise BadRequest(f"{where} is not an expression such as 45+67=: {error}", "prompt") from None
    try:
        expression.operation.check(expression.a, expression.b)  # the machines' domain: 3-5=, 1//0=
        route = check_within_tier(tier, expression, adapters=lambda: getattr(model, "available_adapters", None))
        if model is not None:
            check_operators(model, tier, [routed(expression.op, route)])
    except ValueError as error:
        raise BadRequest(f"{where}: {error}", "prompt") from None
    return expression, route


def _failed(records) -> None:
    """A run that ended in "error" (a model call that failed, a bug) is the server's fault: a 500."""
    for index, record in enumerate(records):
        if record.outcome == "error":
            raise ServerError(f"problem {index} ({record.expr}) failed: {record.detail}")


def chat_expression(body: dict) -> str:
    """The expression in the last user message ("The expression is: 45+67=." → "45+67=")."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list", "messages")
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise BadRequest("no user message: the expression is read from the last one", "messages")
    content = users[-1].get("content")
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    if not isinstance(content, str):
        raise BadRequest("the last user message has no text", "messages")
    found = _IN_TEXT.findall(content) or _TYPED_IN_TEXT.findall(content)
    if not found:
        raise BadRequest(f"no expression such as 45+67= in the last user message: {_short(content)!r}", "messages")
    return typed_expression(found[-1])


def chat_reply(expr: str, record) -> str:
    """What CAEF wrote, then the answer line the chat tasks read (tasks/utils.py: `Answer: ...`)."""
    if record.outcome != "answered" or record.answer is None:
        return f"No answer: the run ended without one (outcome {record.outcome})."
    answer = record.answer.lower() if record.answer in ("True", "False") else record.answer
    return f"{record.final or expr + record.answer}\nAnswer: {answer}"


def _error(status: int, message: str, param: str | None = None, kind: str = "invalid_request_error"):
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}},
                        status_code=status)


# --------------------------------------------------------------------------- the app


def create_app(model, tier: str, *, tokenizer=None, mode: str = "free", batch_size: int | None = None,
               scheduler: Scheduler | None = None, announce=None):
    """The server over `model` (any StepModel: a loaded tier, an endpoint, the oracle) for tier `tier`
    (its name and operand limits). tokenizer: what /tokenize uses, or a callable that loads it as the
    server starts (none: those endpoints answer 404 and lm-eval needs `tokenizer_backend=None`).
    announce(): called once the server takes requests."""
    whole = f"caef-{tier}"
    adapters = served_adapters(model)
    state = {"tokenizer": tokenizer}

    @asynccontextmanager
    async def lifespan(_app):
        from starlette.concurrency import run_in_threadpool

        if callable(state["tokenizer"]) and not hasattr(state["tokenizer"], "encode"):
            # before the first request: lm-eval gives /tokenizer_info 5 s to answer
            state["tokenizer"] = await run_in_threadpool(state["tokenizer"])
        if announce is not None:
            announce()
        yield
        app.state.scheduler.stop()

    app = FastAPI(title="caef-bench", lifespan=lifespan)
    app.state.scheduler = scheduler or Scheduler(model, mode=mode, batch_size=batch_size,
                                                 windowing=windowing(tier)).start()

    async def body_of(request: Request) -> dict:
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > MAX_BODY_BYTES:
            raise BadRequest(f"the body has {length} bytes; at most {MAX_BODY_BYTES}")
        chunks, size = [], 0
        async for chunk in request.stream():  # a body without a length (chunked) is held to the same bound
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise BadRequest(f"the body has more than {MAX_BODY_BYTES} bytes; at most {MAX_BODY_BYTES}")
            chunks.append(chunk)
        try:
            body = json.loads(b"".join(chunks))
        except ValueError:
            raise BadRequest("the body is not JSON") from None
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        name = body.get("model")
        if name not in (whole, *adapters):
            raise BadRequest(f"unknown model {name!r}: this server has {whole} (a whole problem) and the "
                             f"adapters {', '.join(adapters)} (one step each)", "model")
        check_greedy(body)
        return body

    async def wait(request: Request, jobs: list) -> list:
        """Each job's result; if the client goes away first, its jobs are dropped from the rounds
        (`ClientGone`), and so they are if the server stops the request."""
        futures = [asyncio.wrap_future(job.future) for job in jobs]
        pending = set(futures)
        try:
            while pending:
                _, pending = await asyncio.wait(pending, timeout=DISCONNECT_POLL_S)
                if pending and await request.is_disconnected():
                    raise ClientGone
        except (ClientGone, asyncio.CancelledError):
            for job in jobs:
                if not job.future.done():
                    app.state.scheduler.cancel(job)
            raise
        failures = [future.exception() for future in futures if future.exception() is not None]
        if failures:
            raise ServerError(f"{type(failures[0]).__name__}: {failures[0]}")
        return [future.result() for future in futures]

    @app.exception_handler(ClientGone)
    async def client_gone(_request, _gone):  # nobody reads it: nginx's "client closed request"
        return _error(499, "the client disconnected before the answer", kind="client_closed_request")

    @app.exception_handler(BadRequest)
    async def bad_request(_request, error: BadRequest):
        return _error(400, str(error), error.param)

    @app.exception_handler(ServerError)
    async def server_error(_request, error: ServerError):
        return _error(500, str(error), kind="server_error")

    @app.exception_handler(Exception)
    async def failure(_request, error: Exception):  # nothing a request does ends the server
        return _error(500, f"{type(error).__name__}: {error}", kind="server_error")

    @app.get("/health")
    async def health():
        scheduler = app.state.scheduler
        return {"status": "ok" if scheduler.alive else "step loop stopped", "in_flight": len(scheduler.rounds.active),
                "queued": scheduler.queued, "rounds": scheduler.rounds_run, "widest_round": scheduler.widest_round,
                "left": scheduler.left, "dropped": scheduler.dropped}

    @app.get("/v1/models")
    async def models():
        from starlette.concurrency import run_in_threadpool

        weights = await run_in_threadpool(lambda: getattr(model, "fingerprint", None))
        prints = await run_in_threadpool(lambda: getattr(model, "adapter_fingerprints", None) or {})
        created = int(time.time())
        data = [{"id": whole, "object": "model", "created": created, "owned_by": "caef-bench",
                 "caef_kind": "problem", "caef_weights": weights}]
        data += [{"id": name, "object": "model", "created": created, "owned_by": "caef-bench", "parent": whole,
                  "caef_kind": "step", "caef_weights": weights, "caef_fingerprint": prints.get(name)}
                 for name in adapters]
        return {"object": "list", "data": data}

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await body_of(request)
        prompts, stops, limit = prompts_of(body), stop_strings(body), max_tokens_of(body)
        scheduler = app.state.scheduler
        if body["model"] == whole:
            asked = [expression_of(prompt, tier, f"prompt {i}" if len(prompts) > 1 else "the prompt", model)
                     for i, prompt in enumerate(prompts)]
            records = await wait(request, [scheduler.solve(str(expression), route) for expression, route in asked])
            _failed(records)
            choices = [_problem_choice(i, record, stops) for i, record in enumerate(records)]
            tokens = sum(record.n_steps for record in records)
        else:
            outputs = await wait(request, [scheduler.step(body["model"], p, limit) for p in prompts])
            choices = [_step_choice(i, output, stops, limit) for i, output in enumerate(outputs)]
            tokens = sum(output.n_tokens or 0 for output in outputs)
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": body["model"], "choices": choices,
                "usage": {"prompt_tokens": 0, "completion_tokens": tokens, "total_tokens": tokens}}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await body_of(request)
        if body["model"] != whole:
            raise BadRequest(f"{body['model']} is one step of a machine: send its state text to /v1/completions; "
                             f"chat takes {whole}", "model")
        expression, route = expression_of(chat_expression(body), tier, "the expression", model)
        expr = str(expression)
        record, = await wait(request, [app.state.scheduler.solve(expr, route)])
        _failed([record])
        content, _ = cut_at_stop(chat_reply(expr, record), stop_strings(body))
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": whole,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop", "caef": _caef(record)}],
                "usage": {"prompt_tokens": 0, "completion_tokens": record.n_steps, "total_tokens": record.n_steps}}

    def _tokenizer():
        if state["tokenizer"] is None or not hasattr(state["tokenizer"], "encode"):
            raise NoTokenizer
        return state["tokenizer"]

    async def _tokenizer_field(request: Request, field: str, valid, usage: str):
        """The tokenizer, and the request's `field` when `valid` says it is one."""
        tok = _tokenizer()
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            raise BadRequest("the body is not JSON") from None
        value = body.get(field) if isinstance(body, dict) else None
        if not valid(value):
            raise BadRequest(usage, field)
        return tok, body, value

    @app.exception_handler(NoTokenizer)
    async def no_tokenizer(_request, _missing):
        return _error(404, "this server has no tokenizer to offer", kind="not_found_error")

    @app.get("/tokenizer_info")
    async def tokenizer_info():
        tok = _tokenizer()
        return {"eos_token": tok.eos_token, "bos_token": tok.bos_token, "pad_token": tok.pad_token,
                "model_max_length": getattr(tok, "model_max_length", None), "tokenizer_class": type(tok).__name__}

    @app.post("/tokenize")
    async def tokenize(request: Request):
        tok, body, text = await _tokenizer_field(request, "prompt", lambda v: isinstance(v, str),
                                                 'tokenize takes {"prompt": text}')
        try:
            tokens = tok.encode(text, add_special_tokens=bool(body.get("add_special_tokens", False)))
        except Exception as error:
            raise BadRequest(f"the tokenizer cannot read the prompt: {error}", "prompt") from None
        return {"tokens": tokens, "count": len(tokens), "max_model_len": getattr(tok, "model_max_length", None)}

    @app.post("/detokenize")
    async def detokenize(request: Request):
        tok, _, tokens = await _tokenizer_field(
            request, "tokens", lambda v: isinstance(v, list) and all(isinstance(t, int) for t in v),
            'detokenize takes {"tokens": [ids]}')
        try:
            return {"prompt": tok.decode(tokens)}
        except Exception as error:
            raise BadRequest(f"the tokenizer cannot read these ids: {error}", "tokens") from None

    return app


def _caef(record) -> dict:
    """What the run did, beside the OpenAI fields (clients ignore what they do not know)."""
    return {"outcome": record.outcome, "steps": record.n_steps, "detail": record.detail}


def _problem_choice(index: int, record, stops: list[str]) -> dict:
    text, _ = cut_at_stop((record.answer or "") if record.outcome == "answered" else "", stops)
    return {"index": index, "text": text, "finish_reason": "stop", "logprobs": None, "caef": _caef(record)}


def _step_choice(index: int, completion, stops: list[str], limit: int | None) -> dict:
    text, stopped = cut_at_stop(completion.text, stops)
    at_limit = limit is not None and completion.n_tokens is not None and completion.n_tokens >= limit
    return {"index": index, "text": text, "finish_reason": "length" if at_limit and not stopped else "stop",
            "logprobs": None}


__all__ = ["BadRequest", "create_app", "every_adapter", "served_adapters"]
