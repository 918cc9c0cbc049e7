"""The optional LLM: a client for an OpenAI-compatible chat endpoint (llama.cpp's ``llama-server``, Ollama, vLLM,
a hosted API), written with the standard library only.

Nothing in the core flow (discover -> ... -> retrieve) needs it. Its users are the retrieval pipeline (query
translation, query compression, query rewrites, ``ask``'s answer) and the optional explain stage of the indexer
(``explain_chunk``). The prompts live in ``localidx/data/prompts.toml``, not here.

Invariants:
- The network is touched only by ``chat`` (and the helpers that call it), and only when ``llm_base_url`` is set: by
  the user (their config.toml, the environment, a flag) or by a repository file the user trusts (``localidx.trust``).
- Every failure is one ``LLMError`` line naming the endpoint: unreachable, timed out, an HTTP error with the server's
  own message, an answer that is not JSON or has no message in it. ``LLMUnreachable`` (nobody answered at all) lets
  a caller that makes many calls stop at the first one instead of waiting on each.
- The API key is read from the environment variable named by ``llm_api_key_env``; it is never logged or put in
  an error message.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import os
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from functools import lru_cache

from localidx.config import Settings
from localidx import tomlfile
from localidx.errors import ConfigError, LocalidxError, UsageError


log = logging.getLogger(__name__)

_COMPLETIONS = "/chat/completions"
_MESSAGE_CHARS = 200  # the most of a server's own message an error line quotes
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"^\s*```[\w+-]*\s*$", re.M)
_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:english(?: query| translation)?|translation|translated query|query|search query|"
    r"standalone question|question|rewritten question|explanation|summary|answer)(?:\*\*)?\s*:\s*", re.I)
_BULLET = re.compile(r"^\s*(?:[-*•+]|\(?\d{1,2}[.):]|query\s*\d{1,2}\s*:)\s*", re.I)
_QUOTES = "\"'`“”‘’«»"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


class LLMError(LocalidxError):
    """The LLM endpoint failed: unreachable, timed out, an HTTP error, or an answer localidx cannot read."""

    exit_code = 2  # an error to act on (1 means "nothing matched")


class LLMUnreachable(LLMError):
    """Nothing answered at the endpoint's address (connection refused, unknown host, no route)."""


def configured(settings: Settings) -> bool:
    """Whether an LLM endpoint is configured (``llm_base_url`` is set)."""
    return bool(settings.llm_base_url.strip())


def not_configured_message() -> str:
    """How to configure an LLM, for commands that need one (a few lines, ready to print)."""
    from localidx.trust import user_config_path

    return (
        "no LLM is configured. localidx speaks to any OpenAI-compatible server, for example llama.cpp's\n"
        "`llama-server -m model.gguf --port 8080` or Ollama (http://127.0.0.1:11434/v1). Add to your own\n"
        f"{user_config_path()} (every repository), or to the repository's .localidx.toml and then\n"
        "run `localidx trust` there:\n"
        "\n"
        "    [llm]\n"
        '    base_url = "http://127.0.0.1:8080/v1"\n'
        '    model = "qwen2.5-coder-7b-instruct"\n'
        "\n"
        "or set LOCALIDX_LLM_BASE_URL and LOCALIDX_LLM_MODEL. A server that wants a key reads it from\n"
        "LOCALIDX_LLM_API_KEY (or the variable named by llm_api_key_env)."
    )


def model_label(settings: Settings) -> str:
    """The model's name as caches record it (``default`` when the server picks its own)."""
    return settings.llm_model.strip() or "default"


def completions_url(settings: Settings) -> str:
    """``{llm_base_url}/chat/completions`` (a base URL that already ends in it is used as it is)."""
    base = settings.llm_base_url.strip()
    if not base:
        raise ConfigError("no LLM configured: set llm_base_url ([llm] base_url in your config.toml or a trusted "
                          ".localidx.toml, or LOCALIDX_LLM_BASE_URL)")
    parts = urllib.parse.urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"llm_base_url must be an http(s) URL such as http://127.0.0.1:8080/v1, got {base!r}")
    base = base.rstrip("/")
    return base if base.endswith(_COMPLETIONS) else base + _COMPLETIONS


def chat(settings: Settings, messages: list[dict], max_tokens: int = 512, temperature: float = 0.0) -> str:
    """Send ``messages`` (``[{"role", "content"}]``) to the configured endpoint and return the reply's text.

    The model's ``<think>`` blocks are removed. Raises ``ConfigError`` when no valid ``llm_base_url`` is set and
    ``LLMError`` (one line) for anything that goes wrong on the way."""
    url = completions_url(settings)
    shown = settings.llm_base_url.strip()
    body: dict = {"messages": messages, "max_tokens": int(max_tokens), "temperature": float(temperature),
                  "stream": False}
    if settings.llm_model.strip():
        body["model"] = settings.llm_model.strip()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    key = os.environ.get(settings.llm_api_key_env, "").strip() if settings.llm_api_key_env else ""
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
    timeout = settings.llm_timeout_s if settings.llm_timeout_s > 0 else None
    log.debug("chat: %s, %d messages, max_tokens %d", url, len(messages), max_tokens)
    try:
        with _opener(url).open(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        raise LLMError(_http_error(shown, exc)) from None
    except urllib.error.URLError as exc:
        raise _unreachable(shown, exc.reason, settings.llm_timeout_s) from None
    except (TimeoutError, socket.timeout):
        raise LLMError(_timed_out(shown, settings.llm_timeout_s)) from None
    except (http.client.HTTPException, OSError) as exc:
        reason = _one_line(str(exc) or type(exc).__name__)
        raise LLMError(f"the LLM at {shown} broke off its answer: {reason}") from None
    return _strip_think(_content(shown, raw))


# -- the transport ------------------------------------------------------------------------------------------------


def _opener(url: str) -> urllib.request.OpenerDirector:
    # A server on this machine is reached directly, whatever proxy the environment names for the rest.
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost" or _is_loopback(host):
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _unreachable(shown: str, reason, timeout_s: float) -> LLMError:
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return LLMError(_timed_out(shown, timeout_s))
    if isinstance(reason, ConnectionRefusedError):
        return LLMUnreachable(f"cannot reach the LLM at {shown}: connection refused — is the server running?")
    if isinstance(reason, socket.gaierror):
        return LLMUnreachable(f"cannot reach the LLM at {shown}: unknown host")
    if isinstance(reason, OSError):
        text = reason.strerror or str(reason) or type(reason).__name__
        return LLMUnreachable(f"cannot reach the LLM at {shown}: {_one_line(text)}")
    return LLMUnreachable(f"cannot reach the LLM at {shown}: {_one_line(str(reason))}")


def _timed_out(shown: str, timeout_s: float) -> str:
    return f"the LLM at {shown} did not answer within {timeout_s:g} s (llm_timeout_s)"


def _http_error(shown: str, exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read()
    except (OSError, http.client.HTTPException):
        raw = b""
    message = _server_message(raw) or exc.reason or ""
    line = f"the LLM at {shown} answered HTTP {exc.code}"
    if message:
        line += f": {_one_line(str(message))}"
    if exc.code == 404 and "/v1" not in shown:
        line += " (OpenAI-compatible servers usually serve under /v1: is llm_base_url missing it?)"
    elif exc.code in (401, 403):
        line += " (is the API key set in the variable llm_api_key_env names?)"
    return line


def _server_message(raw: bytes) -> str:
    """The message in an error body: ``{"error": {"message"}}`` (OpenAI, llama.cpp), ``{"error": "..."}``
    (Ollama), ``{"detail": ...}``, or the body's text."""
    text = raw.decode("utf-8", "replace").strip()
    if not text:
        return ""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data.get("message")))
        if isinstance(error, dict):
            error = error.get("message") or error.get("type") or json.dumps(error)
        if error:
            return str(error)
    return text


def _content(shown: str, raw: bytes) -> str:
    try:
        data = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        snippet = _one_line(raw.decode("utf-8", "replace"), 80) or "an empty body"
        raise LLMError(f"the LLM at {shown} sent an answer that is not JSON: {snippet}") from None
    if isinstance(data, dict) and data.get("error") and not data.get("choices"):
        raise LLMError(f"the LLM at {shown} answered with an error: {_one_line(_server_message(raw))}")
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise LLMError(f"the LLM at {shown} sent an unexpected answer (no choices[0].message.content): "
                       f"{_one_line(json.dumps(data), 80)}") from None
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise LLMError(f"the LLM at {shown} sent an unexpected answer: message content is {type(content).__name__}")
    return content


def _one_line(text: str, limit: int = _MESSAGE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _strip_think(text: str) -> str:
    text = _THINK.sub("", text)
    if text.lstrip().lower().startswith("<think>"):  # cut off while thinking: no answer in it
        return ""
    return text.strip()


# -- prompts ------------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def prompts() -> dict:
    """The prompt tables of ``localidx/data/prompts.toml``."""
    return tomlfile.package_table("localidx", "data/prompts.toml")


def _ask(settings: Settings, task: str, **values) -> str:
    prompt = prompts()[task]
    messages = [
        {"role": "system", "content": prompt["system"].format(**values)},
        {"role": "user", "content": prompt["user"].format(**values)},
    ]
    return chat(settings, messages, max_tokens=prompt.get("max_tokens", 512),
                temperature=prompt.get("temperature", 0.0))


def _clean_line(line: str) -> str:
    line = _LABEL.sub("", line.strip())
    line = line.strip()
    while len(line) >= 2 and line[0] in _QUOTES and line[-1] in _QUOTES:
        line = line[1:-1].strip()
    return line


def _one_query(answer: str, fallback: str) -> str:
    """The first real line of an answer that should be one query or question; ``fallback`` when there is none."""
    for line in _FENCE.sub("", answer).splitlines():
        line = _clean_line(line)
        if line and not line.endswith(":"):
            return line
    return fallback


# -- the helpers the retrieval pipeline calls ---------------------------------------------------------------------


def translate_to_english(settings: Settings, text: str) -> str:
    """``text`` (a search query in any language) in English, identifiers untouched; ``text`` itself when the model
    answers nothing usable."""
    if not text.strip():
        return text
    return _one_query(_ask(settings, "translate", text=text.strip()), fallback=text)


def standalone_question(settings: Settings, question: str, turns: list[str]) -> str:
    """``question`` rewritten to stand alone, with references to the earlier ``turns`` (oldest first) resolved.

    Without turns the question is returned as it is and the LLM is not asked."""
    earlier = [t.strip() for t in turns if t and t.strip()]
    if not earlier or not question.strip():
        return question
    shown = "\n".join(f"- {_one_line(t, 600)}" for t in earlier[-8:])
    return _one_query(_ask(settings, "standalone", turns=shown, question=question.strip()), fallback=question)


def rewrite_queries(settings: Settings, question: str, n: int) -> list[str]:
    """Up to ``n`` alternative search queries for ``question`` (distinct, the question itself left out)."""
    if n <= 0 or not question.strip():
        return []
    answer = _ask(settings, "rewrite", question=question.strip(), n=n)
    seen = {question.strip().casefold()}
    out = []
    for candidate in _candidate_lines(answer):
        key = candidate.casefold()
        if key in seen:
            continue
        seen.add(key)
        out.append(candidate)
        if len(out) == n:
            break
    return out


def _candidate_lines(answer: str) -> list[str]:
    text = _FENCE.sub("", answer).strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError:
            items = None
        if isinstance(items, list):
            return [_clean_line(str(i)) for i in items if str(i).strip()]
    out = []
    for line in text.splitlines():
        line = _clean_line(_BULLET.sub("", line))
        if line and not line.endswith(":"):
            out.append(line)
    return out


def answer(settings: Settings, pack: dict) -> str:
    """The model's answer to a context pack (the retrieval pipeline's response): its ``instructions`` — the full
    prompt, question and numbered context included — go as the user message, under a short system message."""
    instructions = (pack.get("instructions") or pack.get("augmentedPrompt") or "").strip()
    if not instructions:
        raise UsageError("nothing to ask: the context pack has no instructions")
    reply = _ask(settings, "answer", instructions=instructions)
    if not reply:
        raise LLMError(f"the LLM at {settings.llm_base_url.strip()} gave an empty answer")
    return reply


def explain_chunk(settings: Settings, path: str, language: str, symbol: str, text: str) -> str:
    """What a chunk of code does, in one to three sentences on one line (capped, see ``[explain]`` in prompts.toml).

    Raises ``LLMError`` when the model's answer holds no explanation."""
    prompt = prompts()["explain"]
    limit = int(prompt.get("max_input_chars", 6000))
    body = text if len(text) <= limit else text[:limit] + "\n… (cut)"
    reply = _ask(settings, "explain", path=path, language=language or "unknown", symbol=symbol or "(module code)",
                 text=body)
    explanation = clean_explanation(reply, int(prompt.get("max_sentences", 3)), int(prompt.get("max_chars", 400)))
    if not explanation:
        raise LLMError(f"the LLM at {settings.llm_base_url.strip()} gave an empty explanation for {path}")
    return explanation


def clean_explanation(reply: str, max_sentences: int = 3, max_chars: int = 400) -> str:
    """A model's explanation as one line: labels, fences and bullets gone, at most ``max_sentences`` sentences and
    ``max_chars`` characters."""
    parts = []
    for line in _FENCE.sub("", reply).splitlines():
        line = _clean_line(_BULLET.sub("", line.replace("**", "")))
        if not line or line.startswith("#"):
            continue
        parts.append(line if line[-1] in ".!?:;" else line + ".")
    sentences = _SENTENCE_END.split(" ".join(parts))
    return _one_line(" ".join(sentences[:max_sentences]), max_chars)
