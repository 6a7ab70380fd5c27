"""The endpoint backend: a StepModel whose calls go to any OpenAI-compatible server.

The runtime's loop, batching and records stay in this process; only the model call changes. Each
`generate(prompts, adapter)` is one or more `POST /v1/completions` requests with `model` = the
adapter's name (the vLLM multi-LoRA convention: one base, every adapter served under its name) and
`prompt` = the prompts of that adapter's calls in this round, greedy (`temperature` 0). Requests of
one call are sent concurrently, `batch` prompts each, so several replicas behind one address share
a round.

    caef-bench serve --port 8000 &                            # or vLLM: docs/serving.md
    caef-bench solve "45+67=" --backend openai --base-url http://127.0.0.1:8000/v1

HTTP is the `openai` client's: it sends the API key, times a request out, and retries a refused or
dropped connection, a timeout, 408, 409, 429 and 5xx with exponential backoff (honouring
Retry-After). What it hands back as an answer though it is none, a 200 whose body is cut short or is
not JSON, is retried here (tenacity). Any other answer is an `EndpointError` with the server's own
message, at once.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor

import openai
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from .problem import Completion

ENV_API_KEY = "CAEF_BENCH_API_KEY"
# The client will not go without a key; a server that wants none ignores it (vLLM's examples send the same).
NO_API_KEY = "EMPTY"


class EndpointError(RuntimeError):
    """The server refused a request, or gave no usable answer after every retry. One line; the command
    line prints it as it is and exits with `exit_code` (no traceback: the server's to fix, or the address)."""

    exit_code = 1


class _NotAnAnswer(Exception):
    """A 200 whose body is cut short or is not JSON: retried, as a dropped connection is."""


def api_root(base_url: str) -> str:
    """'http://h:8000', 'http://h:8000/v1' or 'http://h:8000/v1/completions' -> 'http://h:8000/v1'."""
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--base-url must be an http(s) address such as http://127.0.0.1:8000/v1, not {base_url!r}")
    for suffix in ("/chat/completions", "/completions"):
        url = url.removesuffix(suffix)
    return url if url.endswith("/v1") else url + "/v1"


def max_tokens(prompt: str) -> int:
    """Room for a prompt's next state, counted in characters (a token is at least one): as much as the
    in-process model allows itself (`runtime.hf.HFStepModel._limit`), so both stop at the same place."""
    return 3 * len(prompt) + 64


class EndpointStepModel:
    """StepModel over `base_url`'s /v1/completions (see the module docstring).

    retries: tries per request, the first included (the client makes `retries - 1` more); backoff:
    the first wait, in seconds, before a body that was no answer is asked for again (doubling, at most
    30 s; the client's own waits start at 0.5 s and double up to 8 s, or are what Retry-After says, up
    to two minutes). api_key: else CAEF_BENCH_API_KEY, else OPENAI_API_KEY, else none (`NO_API_KEY`).

    fingerprint: the weights the server names in `GET /v1/models` (`caef-bench serve` does, for each
    adapter and for the whole), else "endpoint-" and a hash of the address: records of different
    servers are never mixed, and steps are reused only where the server names its adapters' weights.
    """

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 600, retries: int = 6,
                 backoff: float = 1.0, batch: int = 64, concurrency: int = 8):
        self.root = api_root(base_url)
        if api_key is None:
            api_key = os.environ.get(ENV_API_KEY) or os.environ.get("OPENAI_API_KEY")
        self.api_key = api_key
        self.timeout, self.retries, self.backoff = timeout, max(1, int(retries)), backoff
        self.batch, self.concurrency = max(1, int(batch)), max(1, int(concurrency))
        self.client = openai.OpenAI(base_url=self.root, api_key=api_key or NO_API_KEY, timeout=timeout,
                                    max_retries=self.retries - 1)
        self._listing: dict | None = None
        self.requests = 0  # completion requests made (a retried one counts once)

    # ------------------------------------------------------------------ the StepModel call

    def generate(self, prompts: list[str], adapter: str) -> list[Completion]:
        chunks = [prompts[i:i + self.batch] for i in range(0, len(prompts), self.batch)]
        if len(chunks) == 1:
            return self._complete(chunks[0], adapter)
        with ThreadPoolExecutor(min(self.concurrency, len(chunks))) as pool:
            answers = list(pool.map(lambda chunk: self._complete(chunk, adapter), chunks))
        return [completion for answer in answers for completion in answer]

    def _complete(self, prompts: list[str], adapter: str) -> list[Completion]:
        self.requests += 1
        reply = self._request("POST /completions", adapter, lambda client: client.completions.create(
            model=adapter, prompt=prompts, max_tokens=max(map(max_tokens, prompts)), temperature=0, n=1))
        try:
            choices = sorted(reply.choices, key=lambda choice: choice.index)
            texts = [choice.text for choice in choices]
        except (AttributeError, TypeError) as error:
            raise EndpointError(f"{self.root}/completions answered {adapter} without choices[].text "
                                f"({type(error).__name__}: {error}): {_shown(reply)}") from None
        if len(texts) != len(prompts):
            raise EndpointError(f"{self.root}/completions answered {len(texts)} choices for {len(prompts)} prompts "
                                f"of {adapter}")
        return [Completion(text if isinstance(text, str) else "") for text in texts]

    # ------------------------------------------------------------------ what the server says it serves

    def models(self) -> dict:
        """{model id: its entry} from GET /v1/models; {} when the server does not list them."""
        if self._listing is None:
            try:
                listing = self._request("GET /models", None, lambda client: client.models.list(), retries=1)
                self._listing = {entry.id: entry.to_dict() for entry in listing.data if getattr(entry, "id", None)}
            except (EndpointError, AttributeError, TypeError, ValueError):
                self._listing = {}
        return self._listing

    @property
    def available_adapters(self) -> frozenset[str] | None:
        """The adapters the server lists (GET /v1/models, by name), or None when it lists none of them."""
        from caef_bench.models.names import split_adapter_name

        def is_adapter(name: str) -> bool:
            try:
                split_adapter_name(name)
            except ValueError:
                return False
            return True

        names = frozenset(name for name in self.models() if is_adapter(name))
        return names or None

    @property
    def adapter_fingerprints(self) -> dict:
        return {name: entry["caef_fingerprint"] for name, entry in self.models().items()
                if entry.get("caef_fingerprint") and not name.startswith("caef-")}

    @property
    def fingerprint(self) -> str:
        named = {entry.get("caef_weights") for entry in self.models().values()} - {None}
        if len(named) == 1:
            return named.pop()
        return "endpoint-" + hashlib.sha256(self.root.encode()).hexdigest()[:12]

    # ------------------------------------------------------------------ the client, and what it does not retry

    def _request(self, what: str, model: str | None, call, retries: int | None = None):
        """`call(client)` with `retries` tries in all; its errors as one-line EndpointErrors."""
        attempts = self.retries if retries is None else max(1, retries)
        client = self.client if attempts == self.retries else self.client.with_options(max_retries=attempts - 1)
        method, path = what.split(" ")
        where = f"{method} {self.root}{path}"

        def answer():
            try:
                reply = call(client)
            except json.JSONDecodeError as error:
                raise _NotAnAnswer(f"a body that is not JSON ({error})") from None
            if isinstance(reply, str):  # the client's reading of a body that is not JSON at all
                raise _NotAnAnswer(f"a body that is not JSON: {reply[:200]!r}")
            return reply

        try:
            for attempt in Retrying(retry=retry_if_exception_type(_NotAnAnswer), stop=stop_after_attempt(attempts),
                                    wait=wait_exponential(multiplier=self.backoff, max=30.0), reraise=False):
                with attempt:
                    return answer()
        except RetryError as error:
            raise EndpointError(f"{where}: no answer after {attempts} tries; "
                                f"last: {error.last_attempt.exception()}") from None
        except openai.APIStatusError as error:
            message = f"{error.status_code} {_error_message(error)}"
            if error.status_code in (408, 409, 429) or error.status_code >= 500:  # what the client retries
                raise EndpointError(f"{where}: no answer after {attempts} tries; last: {message}") from None
            raise EndpointError(f"{where} ({model or ''}): {message}") from None
        except openai.APITimeoutError:
            raise EndpointError(f"{where}: no answer after {attempts} tries; "
                                f"last: no reply within {self.timeout:g} s") from None
        except openai.APIConnectionError as error:
            cause = error.__cause__ or error
            raise EndpointError(f"{where}: no answer after {attempts} tries; "
                                f"last: {type(cause).__name__}: {_one_line(str(cause))}") from None
        except openai.OpenAIError as error:
            raise EndpointError(f"{where} ({model or ''}): {_one_line(str(error))}") from None


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]


def _error_message(error: openai.APIStatusError) -> str:
    """The server's own reason: OpenAI's {"error": {"message"}}, FastAPI's {"detail"}, or the body."""
    body = error.body  # the client's: what is under "error" when there is one, else the whole body
    if isinstance(body, dict):
        reason = body.get("message") or body.get("detail")
        return _one_line(str(reason) if reason else json.dumps(body))
    if isinstance(body, str) and body.strip():
        return _one_line(body)
    return error.response.reason_phrase or "no reason given"


def _shown(reply) -> str:
    """A reply as the server sent it, shortened, for an error message."""
    if isinstance(reply, openai.BaseModel):
        return reply.to_json(indent=None, warnings=False)[:300]
    return repr(reply)[:300]


__all__ = ["EndpointError", "EndpointStepModel", "api_root", "max_tokens"]
