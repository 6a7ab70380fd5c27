"""The endpoint backend: a StepModel whose calls go to any OpenAI-compatible server.

The runtime's loop, batching and records stay in this process; only the model call changes. Each
`generate(prompts, adapter)` is one or more `POST /v1/completions` requests with `model` = the
adapter's name (the vLLM multi-LoRA convention: one base, every adapter served under its name) and
`prompt` = the prompts of that adapter's calls in this round, greedy (`temperature` 0). Requests of
one call are sent concurrently, `batch` prompts each, so several replicas behind one address share
a round.

    caef-bench serve --port 8000 &                            # or vLLM: docs/serving.md
    caef-bench solve "45+67=" --backend openai --base-url http://127.0.0.1:8000/v1

Standard library only (urllib): retries with exponential backoff on a refused or dropped
connection, a timeout, 408, 409, 429 and 5xx (honouring Retry-After); any other answer is an
`EndpointError` with the server's own message, at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from .problem import Completion

RETRIED_STATUS = {408, 409, 429, 500, 502, 503, 504}
ENV_API_KEY = "CAEF_BENCH_API_KEY"


class EndpointError(RuntimeError):
    """The server refused a request, or gave no usable answer after every retry."""


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
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.batch, self.concurrency = max(1, int(batch)), max(1, int(concurrency))
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
        payload = {"model": adapter, "prompt": prompts, "max_tokens": max(map(max_tokens, prompts)),
                   "temperature": 0, "n": 1}
        self.requests += 1
        reply = self._request("POST", "/completions", payload)
        try:
            choices = sorted(reply["choices"], key=lambda choice: choice["index"])
            texts = [choice["text"] for choice in choices]
        except (KeyError, TypeError) as error:
            raise EndpointError(f"{self.root}/completions answered {adapter} without choices[].text "
                                f"({type(error).__name__}: {error}): {json.dumps(reply)[:300]}") from None
        if len(texts) != len(prompts):
            raise EndpointError(f"{self.root}/completions answered {len(texts)} choices for {len(prompts)} prompts "
                                f"of {adapter}")
        return [Completion(text if isinstance(text, str) else "") for text in texts]

    # ------------------------------------------------------------------ what the server says it serves

    def models(self) -> dict:
        """{model id: its entry} from GET /v1/models; {} when the server does not list them."""
        if self._listing is None:
            try:
                listing = self._request("GET", "/models", None, retries=1)
                self._listing = {entry["id"]: entry for entry in listing.get("data", []) if "id" in entry}
            except (EndpointError, AttributeError, TypeError):
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

    # ------------------------------------------------------------------ HTTP, with retries

    def _request(self, method: str, path: str, payload: dict | None, retries: int | None = None) -> dict:
        url = self.root + path
        data = None if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        attempts = self.retries if retries is None else retries
        last = "no attempt made"
        for attempt in range(attempts):
            wait = self.backoff * 2 ** attempt
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method=method)
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    body = response.read()
                try:
                    return json.loads(body)
                except ValueError:
                    last = f"a body that is not JSON: {body[:200]!r}"
            except urllib.error.HTTPError as error:
                message = _error_message(error)
                if error.code not in RETRIED_STATUS:
                    raise EndpointError(f"{method} {url} ({payload.get('model') if payload else ''}): "
                                        f"{error.code} {message}") from None
                last = f"{error.code} {message}"
                wait = max(wait, _retry_after(error))
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as error:
                last = f"{type(error).__name__}: {getattr(error, 'reason', error)}"
            if attempt + 1 < attempts:
                time.sleep(min(wait, 30.0))
        raise EndpointError(f"{method} {url}: no answer after {attempts} tries; last: {last}")


def _error_message(error: urllib.error.HTTPError) -> str:
    """The server's own reason: OpenAI's {"error": {"message"}}, FastAPI's {"detail"}, or the body."""
    try:
        body = error.read().decode(errors="replace")
    except OSError:
        return str(error.reason)
    try:
        parsed = json.loads(body)
    except ValueError:
        return body.strip()[:300] or str(error.reason)
    if isinstance(parsed, dict):
        inner = parsed.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if parsed.get("message") or parsed.get("detail"):
            return str(parsed.get("message") or parsed.get("detail"))
    return body.strip()[:300]


def _retry_after(error: urllib.error.HTTPError) -> float:
    try:
        return float(error.headers.get("Retry-After", 0))
    except (TypeError, ValueError):
        return 0.0


__all__ = ["EndpointError", "EndpointStepModel", "api_root", "max_tokens"]
