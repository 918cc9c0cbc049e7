"""The LLM client against a real HTTP server on 127.0.0.1 (tests/llm_stub.py): the chat round trip, the API key,
every failure as one LocalidxError line, and the helpers reading untidy answers."""

from __future__ import annotations

import json

import pytest

from llm_stub import Reply, error_body, serve_llm, unused_url, user_message
from localidx import llm
from localidx.config import Settings
from localidx.errors import ConfigError, LocalidxError, UsageError


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
