"""The LLM client against a real HTTP server on 127.0.0.1 (tests/llm_stub.py): the chat round trip, the API key,
every failure as one LocalidxError line, and the helpers reading untidy answers."""

from __future__ import annotations

import json
import time

import pytest

from llm_stub import Reply, error_body, serve_llm, unused_url, user_message
from localidx import llm
from localidx.config import Settings
from localidx.errors import ConfigError, LocalidxError, UsageError
from localidx.retrieve import ask


def settings_for(url: str, **extra) -> Settings:
    return Settings(llm_base_url=url, llm_model="stub-model", llm_timeout_s=5.0, **extra)


def test_chat_round_trip():
    with serve_llm(lambda req: "hello from the stub") as url:
        reply = llm.chat(settings_for(url), [{"role": "user", "content": "hi"}], max_tokens=7)
    assert reply == "hello from the stub"
    [request] = url.requests
    assert request["method"] == "POST" and request["path"] == "/v1/chat/completions"
    assert request["body"]["model"] == "stub-model"
    assert request["body"]["messages"] == [{"role": "user", "content": "hi"}]
    assert request["body"]["max_tokens"] == 7 and request["body"]["temperature"] == 0.0
    assert request["body"]["stream"] is False
    assert request["headers"]["content-type"] == "application/json"


def test_base_url_with_trailing_slash_or_full_path_and_no_model():
    with serve_llm() as url:
        llm.chat(Settings(llm_base_url=url + "/"), [{"role": "user", "content": "a"}])
        llm.chat(Settings(llm_base_url=url + "/chat/completions"), [{"role": "user", "content": "b"}])
    assert [r["path"] for r in url.requests] == ["/v1/chat/completions"] * 2
    assert "model" not in url.requests[0]["body"]  # the server's own model


def test_api_key_comes_from_the_named_environment_variable(monkeypatch):
    monkeypatch.delenv("LOCALIDX_LLM_API_KEY", raising=False)
    with serve_llm() as url:
        llm.chat(settings_for(url), [{"role": "user", "content": "x"}])
        monkeypatch.setenv("LOCALIDX_LLM_API_KEY", "sk-local-123")
        llm.chat(settings_for(url), [{"role": "user", "content": "x"}])
        monkeypatch.setenv("MY_KEY", "other-key")
        llm.chat(settings_for(url, llm_api_key_env="MY_KEY"), [{"role": "user", "content": "x"}])
    auth = [r["headers"].get("authorization") for r in url.requests]
    assert auth == [None, "Bearer sk-local-123", "Bearer other-key"]


def test_think_blocks_and_content_parts_are_read():
    answers = iter([
        "<think>let me see\nhmm</think>\nThe answer.",
        {"choices": [{"message": {"role": "assistant", "content": [{"type": "text", "text": "parts"}]}}]},
    ])
    with serve_llm(lambda req: next(answers)) as url:
        s = settings_for(url)
        assert llm.chat(s, [{"role": "user", "content": "q"}]) == "The answer."
        assert llm.chat(s, [{"role": "user", "content": "q"}]) == "parts"


def _error(settings: Settings) -> LocalidxError:
    with pytest.raises(LocalidxError) as info:
        llm.chat(settings, [{"role": "user", "content": "q"}])
    message = str(info.value)
    assert message and "\n" not in message and "Traceback" not in message
    return info.value


def test_connection_refused_is_one_line_that_says_what_to_check():
    url = unused_url()
    error = _error(settings_for(url))
    assert isinstance(error, llm.LLMUnreachable)
    assert str(error) == f"cannot reach the LLM at {url}: connection refused — is the server running?"


@pytest.mark.parametrize("reply, expected", [
    (Reply(status=500, body=error_body("model is still loading")), "answered HTTP 500: model is still loading"),
    (Reply(status=400, body={"error": "context length exceeded"}), "answered HTTP 400: context length exceeded"),
    (Reply(status=404, raw=b"File Not Found", content_type="text/plain"), "answered HTTP 404: File Not Found"),
    (Reply(status=401, body=error_body("invalid api key")), "invalid api key (is the API key set"),
    (Reply(raw=b"<html>\n<body>proxy page</body>\n</html>", content_type="text/html"),
     "sent an answer that is not JSON: <html> <body>proxy page"),
    (Reply(raw=b"", content_type="text/plain"), "not JSON: an empty body"),
    ({"choices": []}, "unexpected answer (no choices[0].message.content)"),
    ({"object": "list", "data": []}, "unexpected answer"),
    ({"choices": [{"message": {"content": 42}}]}, "message content is int"),
    ({"error": {"message": "rate limited\nslow down"}}, "answered with an error: rate limited slow down"),
    (Reply(drop=True), "broke off its answer"),
])
def test_every_failure_is_one_localidx_error_line(reply, expected):
    with serve_llm(lambda req: reply) as url:
        error = _error(settings_for(url))
    assert isinstance(error, llm.LLMError) and not isinstance(error, llm.LLMUnreachable)
    assert str(error).startswith(f"the LLM at {url} ")
    assert expected in str(error)


def test_a_slow_server_times_out_with_one_line():
    with serve_llm(lambda req: Reply(content="late", delay_s=2.0)) as url:
        error = _error(settings_for(url).replace(llm_timeout_s=0.3))
    assert str(error) == f"the LLM at {url} did not answer within 0.3 s (llm_timeout_s)"


def test_404_without_v1_hints_at_the_path():
    with serve_llm(lambda req: Reply(status=404, body=error_body("not found"))) as url:
        error = _error(settings_for(url.removesuffix("/v1")))
    assert "missing it?" in str(error)


def test_unknown_host_is_unreachable():
    error = _error(settings_for("http://no-such-host.invalid:8080/v1"))
    assert isinstance(error, llm.LLMUnreachable) and "cannot reach the LLM at" in str(error)


@pytest.mark.parametrize("url", ["", "127.0.0.1:8080/v1", "ftp://host/v1"])
def test_missing_or_bad_url_is_a_config_error(url):
    with pytest.raises(ConfigError) as info:
        llm.chat(Settings(llm_base_url=url), [{"role": "user", "content": "q"}])
    assert "\n" not in str(info.value) and "llm_base_url" in str(info.value)


def test_configured_and_not_configured_message():
    assert not llm.configured(Settings())
    assert llm.configured(Settings(llm_base_url="http://127.0.0.1:8080/v1"))
    message = llm.not_configured_message()
    for needle in ("[llm]", 'base_url = "http://127.0.0.1:8080/v1"', "model = ", "LOCALIDX_LLM_BASE_URL",
                   "LOCALIDX_LLM_MODEL", "llama-server", "http://127.0.0.1:11434/v1"):
        assert needle in message


def test_every_prompt_has_a_system_and_a_user_template():
    tables = llm.prompts()
    for task in ("answer", "translate", "standalone", "rewrite", "explain"):
        assert tables[task]["system"].strip() and tables[task]["user"].strip()
        assert tables[task]["max_tokens"] > 0


# -- the helpers ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [
    "How is a password reset?",
    '"How is a password reset?"',
    "English: How is a password reset?",
    "Translation: `How is a password reset?`\n\n(Translated from German.)",
    "<think>German to English</think>How is a password reset?",
    "```\nHow is a password reset?\n```",
])
def test_translate_reads_the_first_real_line(answer):
    with serve_llm(lambda req: answer) as url:
        out = llm.translate_to_english(settings_for(url), "Wie wird ein Passwort zurückgesetzt?")
    assert out == "How is a password reset?"
    assert user_message(url.requests[0]) == "Wie wird ein Passwort zurückgesetzt?"
    assert url.requests[0]["body"]["messages"][0]["role"] == "system"


def test_translate_falls_back_to_the_text_on_an_empty_answer():
    with serve_llm(lambda req: "  \n") as url:
        assert llm.translate_to_english(settings_for(url), "verifyToken ausführen") == "verifyToken ausführen"


def test_standalone_question_uses_the_turns_and_skips_the_llm_without_them():
    with serve_llm(lambda req: "Standalone question: Where does verify_token check the expiry?") as url:
        s = settings_for(url)
        assert llm.standalone_question(s, "where does it check expiry?", []) == "where does it check expiry?"
        assert url.requests == []
        out = llm.standalone_question(s, "where does it check expiry?",
                                      ["what does verify_token do?", "It decodes a JWT and checks it."])
    assert out == "Where does verify_token check the expiry?"
    sent = user_message(url.requests[0])
    assert "verify_token do?" in sent and "It decodes a JWT" in sent and "where does it check expiry?" in sent


@pytest.mark.parametrize("answer", [
    "token expiry check\nverify_token expiration\nJWT exp claim validation",
    "Here are 3 queries:\n1. token expiry check\n2. verify_token expiration\n3. JWT exp claim validation",
    "- \"token expiry check\"\n- verify_token expiration\n\n* JWT exp claim validation\n- token expiry check",
    '["token expiry check", "verify_token expiration", "JWT exp claim validation", "one too many"]',
    "```json\n[\"token expiry check\", \"verify_token expiration\", \"JWT exp claim validation\"]\n```",
    "Query 1: token expiry check\nQuery 2: where is the token expiry checked?\nQuery 3: verify_token expiration\n"
    "Query 4: JWT exp claim validation",
])
def test_rewrite_queries_parses_lists_robustly(answer):
    question = "where is the token expiry checked?"
    with serve_llm(lambda req: answer) as url:
        out = llm.rewrite_queries(settings_for(url), question, 3)
    assert out == ["token expiry check", "verify_token expiration", "JWT exp claim validation"]
    assert "3" in user_message(url.requests[0]) and question in user_message(url.requests[0])


def test_rewrite_queries_with_n_zero_asks_nothing():
    with serve_llm() as url:
        assert llm.rewrite_queries(settings_for(url), "anything", 0) == []
    assert url.requests == []


def test_answer_sends_the_instructions_as_the_user_message():
    pack = {"augmentedPrompt": "Q: what?\n[1] a.py:1", "instructions": "Use the context.\n\nQ: what?\n[1] a.py:1",
            "noResults": False, "warnings": []}
    with serve_llm(lambda req: "It does X [1].") as url:
        assert llm.answer(settings_for(url), pack) == "It does X [1]."
    messages = url.requests[0]["body"]["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == pack["instructions"]
    assert messages[0]["content"] == llm.prompts()["answer"]["system"]
    assert url.requests[0]["body"]["max_tokens"] == llm.prompts()["answer"]["max_tokens"]
    with pytest.raises(UsageError):
        llm.answer(settings_for(url), {"instructions": "", "augmentedPrompt": ""})


def test_explain_chunk_is_short_and_one_line():
    long_answer = ("**Explanation:**\n- Parses the config file.\n- Validates every key\n"
                   "It then merges defaults. Finally it logs. And more words follow here.")
    with serve_llm(lambda req: long_answer) as url:
        out = llm.explain_chunk(settings_for(url), "a/config.py", "python", "load_config", "def load_config(): {x}")
    assert out == "Parses the config file. Validates every key. It then merges defaults."
    sent = user_message(url.requests[0])
    assert "a/config.py" in sent and "load_config" in sent and "def load_config(): {x}" in sent
    with serve_llm(lambda req: "word " * 300) as url:
        out = llm.explain_chunk(settings_for(url), "a.py", "python", "f", "x" * 20000)
    assert len(out) <= llm.prompts()["explain"]["max_chars"] and "\n" not in out
    assert len(user_message(url.requests[0])) < 7000  # the chunk text was cut


def test_explain_chunk_with_an_empty_answer_is_an_error():
    with serve_llm(lambda req: "<think>endless thinking") as url:
        with pytest.raises(llm.LLMError) as info:
            llm.explain_chunk(settings_for(url), "a.py", "python", "f", "def f(): pass")
    assert "empty explanation" in str(info.value)


def test_the_key_never_appears_in_an_error(monkeypatch):
    monkeypatch.setenv("LOCALIDX_LLM_API_KEY", "sk-secret-value")
    with serve_llm(lambda req: Reply(status=401, body=error_body("bad key"))) as url:
        error = _error(settings_for(url))
    assert "sk-secret-value" not in str(error)
    assert json.dumps(url.requests[0]["body"]).find("sk-secret-value") == -1


# -- ask: the window, the fitting, the retry, the stream, the citations, --json ---------------------------------


def test_context_refusals_are_recognised_with_their_figures():
    python = ("This model's maximum context length is 4096 tokens. However, you requested 5655 tokens (4631 in the "
              "messages, 1024 in the completion). Please reduce the length of the messages or completion.")
    assert ask.context_refusal(python) == {"window": 4096, "prompt": 4631, "completion": 1024}
    server = "the request exceeds the available context size, try increasing it (n_prompt_tokens: 5000, n_ctx: 4096)"
    assert ask.context_refusal(server) == {"window": 4096, "prompt": 5000}
    assert ask.context_refusal("model is still loading") is None
    assert ask.context_refusal("invalid api key") is None


def test_the_window_comes_from_the_setting_the_server_or_an_assumption():
    def server(request):
        if request["path"] == "/props":
            return {"default_generation_settings": {"n_ctx": 2048}}
        return Reply(status=404, body=error_body("not found"))

    with serve_llm(server) as url:
        assert llm.model_window(settings_for(url)) == llm.Window(2048, "the server's /props")
        assert llm.model_window(settings_for(url, llm_context_tokens=900)).tokens == 900
    vllm = {"object": "list", "data": [{"id": "stub-model", "max_model_len": 32768}]}
    with serve_llm(lambda r: vllm if r["path"] == "/v1/models" else Reply(status=404, raw=b"")) as url:
        assert llm.model_window(settings_for(url)).tokens == 32768
    ollama = {"model_info": {"llama.context_length": 131072}, "parameters": "num_ctx 8192\nstop \"<|eot|>\""}
    with serve_llm(lambda r: ollama if r["path"] == "/api/show" else Reply(status=404, raw=b"")) as url:
        assert llm.model_window(settings_for(url)) == llm.Window(8192, "Ollama's /api/show (num_ctx)")
    with serve_llm(lambda r: Reply(status=404, raw=b"")) as url:
        window = llm.model_window(settings_for(url))
    assert window.tokens == llm.ASSUMED_WINDOW and "llm_context_tokens" in window.source


def test_the_answer_is_reserved_from_the_window_and_the_ratio_measured_by_the_server():
    def server(request):
        if request["path"] == "/tokenize":  # a tokenizer that splits twice as finely as cl100k
            from localidx.text import tokens

            return {"tokens": list(range(2 * tokens.count(request["body"]["content"])))}
        return Reply(status=404, raw=b"")

    with serve_llm(server) as url:
        plan = ask.plan_ask(settings_for(url), 800, llm.Window(4096, "test"))
    assert plan.answer_tokens == 800 and plan.ratio == 2.0 and plan.ratio_source == "the server's tokenizer"
    room = 4096 - 800 - plan.system_tokens - ask.CHAT_OVERHEAD - int(4096 * ask.WINDOW_MARGIN)
    assert plan.pack_tokens == room // 2
    with serve_llm(lambda r: Reply(status=404, raw=b"")) as url:
        small = ask.plan_ask(settings_for(url), 800, llm.Window(1024, "test"))
    assert small.answer_tokens == 256 and small.ratio == ask.DEFAULT_RATIO  # a quarter of a small window at most
    assert 0 < small.pack_tokens < (1024 - 256) / ask.DEFAULT_RATIO


FILES = {
    "src/auth/tokens.py": ("import hmac\n\n\ndef verify_token(token, secret):\n"
                           '    """Check a signed token: its signature must match the secret."""\n'
                           "    body, signature = token.rsplit('.', 1)\n"
                           "    return hmac.compare_digest(sign(body, secret), signature)\n\n\n"
                           "def sign(body, secret):\n"
                           "    return hmac.new(secret, body.encode(), 'sha256').hexdigest()\n"),
    "src/billing/invoice.py": "def invoice_total(lines):\n    return sum(line.amount for line in lines)\n",
}


_STATE: dict[str, dict] = {}  # each indexed repository's environment: its own state dir, the fake embedder


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    from conftest import init_repo

    base = tmp_path_factory.mktemp("ask")
    root = init_repo(base / "repo", FILES)
    _STATE[str(root)] = {"LOCALIDX_EMBED_MODEL": "fake", "LOCALIDX_HOME": str(base / "home"), "LOCALIDX_WATCH": "0",
                         "LOCALIDX_DAEMON": "never", "XDG_RUNTIME_DIR": str(base)}
    assert _cli(root, "index", "-q").returncode == 0
    return root


def _cli(root, *args: str, env: dict | None = None):
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if not k.startswith("LOCALIDX_")}
    return subprocess.run([sys.executable, "-m", "localidx", *args], cwd=root, capture_output=True, text=True,
                          env={**base, **_STATE[str(root)], **(env or {})}, timeout=120)


def _llm_env(url: str, **extra) -> dict:
    return {"LOCALIDX_LLM_BASE_URL": url, "LOCALIDX_LLM_MODEL": "stub-model", **extra}


def _chat_requests(url) -> list[dict]:
    return [r for r in url.requests if r["path"] == "/v1/chat/completions"]


def test_ask_streams_the_answer_and_lists_only_the_cited_sources(indexed):
    answer = "verify_token compares the digests [1] with hmac.compare_digest."
    with serve_llm(lambda req: Reply(content=answer, piece_delay_s=0.01)) as url:
        r = _cli(indexed, "ask", "how is the token signature verified", env=_llm_env(url))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(answer + "\n")
    [chat] = _chat_requests(url)
    assert chat["body"]["stream"] is True
    assert chat["body"]["max_tokens"] == 800 and chat["body"]["temperature"] == 0.1  # the profile's settings
    sources = r.stdout.split("Sources:\n", 1)[1].splitlines()
    assert len(sources) == 1 and sources[0].startswith("  [1] src/auth/tokens.py:")
    assert "asking stub-model: a pack of" in r.stderr and f"window {llm.ASSUMED_WINDOW}" in r.stderr


def test_ask_flags_every_citation_the_pack_does_not_hold(indexed):
    answer = "See [1] and [9], and src/auth/tokens.py:1796-1802, and src/app.py:3 for more."
    with serve_llm(lambda req: answer) as url:
        r = _cli(indexed, "ask", "how is the token signature verified", env=_llm_env(url))
        data = json.loads(_cli(indexed, "ask", "how is the token signature verified", "--json",
                               env=_llm_env(url)).stdout)
    assert r.returncode == 0, r.stderr
    flagged = [line.strip() for line in r.stdout.splitlines() if "not in the pack" in line]
    assert flagged == ["not in the pack: [9]", "not in the pack: src/auth/tokens.py:1796-1802",
                       "not in the pack: src/app.py:3"]
    assert "cites 3 place(s) the pack does not hold" in r.stderr
    assert data["citations"]["notInPack"] == ["[9]", "src/auth/tokens.py:1796-1802", "src/app.py:3"]
    assert [c["n"] for c in data["citations"]["cited"]] == [1]


def test_ask_sizes_the_pack_to_the_window_and_the_answer_settings_reach_the_request(indexed):
    with serve_llm(lambda req: "An answer [1].") as url:
        r = _cli(indexed, "ask", "how is the token signature verified", "--json",
                 env=_llm_env(url, LOCALIDX_LLM_CONTEXT_TOKENS="700", LOCALIDX_LLM_ANSWER_TOKENS="64"))
    data = json.loads(r.stdout)
    assert r.returncode == 0 and data["error"] is None and data["answer"] == "An answer [1]."
    assert data["plan"]["window"] == 700 and data["plan"]["windowSource"] == "llm_context_tokens"
    assert data["plan"]["answerTokens"] == 64
    [chat] = _chat_requests(url)
    assert chat["body"]["max_tokens"] == 64
    sent = len(chat["body"]["messages"][1]["content"])
    assert data["attempts"][0]["promptTokens"] <= max(256, data["plan"]["packTokens"]) and sent > 0


def test_a_context_refusal_shrinks_the_pack_and_retries_once(indexed):
    def server(request):
        if request["path"] != "/v1/chat/completions":
            return Reply(status=404, raw=b"")
        if len(_chat_requests(url)) == 1:
            return Reply(status=400, body=error_body(
                "This model's maximum context length is 600 tokens. However, you requested 1900 tokens (1500 in the "
                "messages, 400 in the completion). Please reduce the length of the messages or completion."))
        return "Shrunk and answered [1]."

    with serve_llm(server) as url:
        r = _cli(indexed, "ask", "how is the token signature verified", "--max-tokens", "3000", "--json",
                 env=_llm_env(url))
    data = json.loads(r.stdout)
    assert r.returncode == 0, r.stderr
    assert data["answer"] == "Shrunk and answered [1]." and len(data["attempts"]) == 2
    first, second = data["attempts"]
    assert "maximum context length is 600" in first["error"]
    assert second["packTokens"] < first["packTokens"] and second["window"] == 600
    assert data["plan"]["windowSource"] == "the server's refusal"
    bodies = [r["body"] for r in _chat_requests(url)]
    assert bodies[1]["max_tokens"] <= 150  # the answer's room shrank with the window too


def test_a_second_refusal_fails_with_one_line_naming_the_settings_and_json_keeps_the_pack(indexed):
    refusal = Reply(status=400, body=error_body("the request exceeds the available context size, try increasing it"))
    with serve_llm(lambda req: refusal) as url:
        plain = _cli(indexed, "ask", "how is the token signature verified", env=_llm_env(url))
        r = _cli(indexed, "ask", "how is the token signature verified", "--json", env=_llm_env(url))
    assert plain.returncode == 2 and plain.stdout == ""
    [line] = [x for x in plain.stderr.splitlines() if x.startswith("localidx: error:")]
    assert "--max-tokens" in line and "llm_context_tokens" in line
    assert r.returncode == 2
    data = json.loads(r.stdout)
    assert data["answer"] is None and data["error"]["code"] == "llm_context_too_small"
    assert data["pack"]["matches"] and data["pack"]["instructions"]
    assert len(_chat_requests(url)) == 4  # two tries for each command, no more


def test_ask_json_carries_the_pack_and_the_error_when_the_llm_is_down(indexed):
    url = unused_url()
    r = _cli(indexed, "ask", "how is the token signature verified", "--json", env=_llm_env(url))
    assert r.returncode == 2
    data = json.loads(r.stdout)
    assert data["answer"] is None and data["error"]["code"] == "llm_unreachable"
    assert "connection refused" in data["error"]["message"] and data["pack"]["matches"]
    plain = _cli(indexed, "ask", "how is the token signature verified", env=_llm_env(url))
    assert plain.returncode == 2 and "connection refused" in plain.stderr and "Traceback" not in plain.stderr


def test_a_server_that_does_not_stream_is_read_as_one_answer(indexed):
    with serve_llm(lambda req: Reply(content="Whole answer [1].", stream=False)) as url:
        r = _cli(indexed, "ask", "how is the token signature verified", env=_llm_env(url))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Whole answer [1].\n")


def test_the_first_token_wait_and_the_idle_wait_end_the_request():
    with serve_llm(lambda req: Reply(content="late", delay_s=1.5)) as url:
        settings = settings_for(url, llm_first_token_s=0.3)
        with pytest.raises(llm.LLMTimeout, match="sent no answer within 0.3 s \\(llm_first_token_s"):
            llm.stream_answer(settings, "q", max_tokens=16, temperature=0.0)
    pieces: list[str] = []
    with serve_llm(lambda req: Reply(pieces=["one ", "two "] + ["late"] * 8, piece_delay_s=0.4)) as url:
        settings = settings_for(url, llm_first_token_s=5, llm_idle_s=0.15)
        with pytest.raises(llm.LLMTimeout, match="stopped sending for 0.15 s mid-answer \\(llm_idle_s\\)"):
            llm.stream_answer(settings, "q", max_tokens=16, temperature=0.0, on_text=pieces.append)
        deadline = time.monotonic() + 5
        while not url.closed and time.monotonic() < deadline:
            time.sleep(0.05)
    assert pieces == ["one "]  # the first piece came within the first wait, the next not within the idle wait
    assert url.closed and url.closed[0] < 10  # the server saw the client go and sent no more


def test_think_blocks_are_left_out_of_the_stream():
    shown: list[str] = []
    with serve_llm(lambda req: Reply(pieces=["<thi", "nk>hmm", " still</th", "ink>The ", "answer."])) as url:
        reply, stats = llm.stream_answer(settings_for(url), "q", max_tokens=16, temperature=0.0,
                                         on_text=shown.append)
    assert reply == "The answer." and "".join(shown) == "The answer." and stats["streamed"]


def test_index_expressions_are_not_citations():
    pack = {"matches": [{"path": "a.py", "start_line": 1, "end_line": 9}]}
    assert ask.check_citations("It reads args[0] and parts[2] (see [1]).", pack) == ([1], [])


def test_ctrl_c_mid_answer_closes_the_request(indexed):
    import os
    import signal
    import subprocess
    import sys

    slow = Reply(pieces=["The answer "] + ["goes on "] * 60, piece_delay_s=0.2)
    with serve_llm(lambda req: slow if req["path"] == "/v1/chat/completions" else Reply(status=404, raw=b"")) as url:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOCALIDX_")}
        env.update(_STATE[str(indexed)], **_llm_env(url))
        # A test run started in the background (`cmd &` in a script) ignores ^C, and its children inherit that:
        # the command gets ^C as a terminal gives it.
        proc = subprocess.Popen([sys.executable, "-m", "localidx", "ask", "how is the token signature verified"],
                                cwd=indexed, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            assert proc.stdout.read(len("The answer ")) == b"The answer "  # streamed: here before the end
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 130
        finally:
            proc.kill()
            proc.wait()
        deadline = time.monotonic() + 10
        while not url.closed and time.monotonic() < deadline:
            time.sleep(0.05)
    assert url.closed and url.closed[0] < 60  # the server saw the client go and stopped sending


def test_nonsense_is_no_match_and_the_model_is_not_asked(tmp_path):
    """As search and context say: a question none of whose words the index holds, with a similarity under the
    shipped model's floor, matches nothing; the model is not asked to answer from nothing."""
    from conftest import init_repo

    root = init_repo(tmp_path / "repo", FILES)
    _STATE[str(root)] = {"LOCALIDX_EMBED_MODEL": "static-minilm", "LOCALIDX_HOME": str(tmp_path / "home"),
                         "LOCALIDX_WATCH": "0", "LOCALIDX_DAEMON": "never", "HF_HUB_OFFLINE": "1"}
    assert _cli(root, "index", "-q").returncode == 0
    with serve_llm(lambda req: "An invented answer [1].") as url:
        plain = _cli(root, "ask", "nonsensequxzz", env=_llm_env(url))
        data = _cli(root, "ask", "nonsensequxzz", "--json", env=_llm_env(url))
        assert not _chat_requests(url)
    assert plain.returncode == 1 and plain.stdout == "" and "no matches" in plain.stderr, plain.stderr
    record = json.loads(data.stdout)
    assert data.returncode == 1 and record["answer"] is None and record["noResults"] is True
    assert record["pack"]["noResults"] is True
