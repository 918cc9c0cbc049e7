"""``ask``: a context pack that fits the model's window, an answer streamed from it, and its citations checked.

Place in the flow: the last, optional step of retrieve: after ``context.py`` has built a pack, ``localidx ask`` sends
it to the LLM (``localidx.llm``, the client) with the question and prints the answer as it comes.

A context pack is sized in cl100k tokens; the model counts the same text in its own tokens (a small model's
tokenizer: 1.4-1.8 times as many on code), and the answer is generated inside the same window. So `ask` finds the
window (the setting llm_context_tokens, else what the server says), keeps room for the answer FROM it, converts the
rest to cl100k with the server's own tokenizer where it has one (else DEFAULT_RATIO), builds the pack to that
budget, and on a context-length refusal shrinks the pack by the server's own figures and tries once more.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from localidx.config import Settings
from localidx.errors import UsageError
from localidx.llm import LLMError, Window, model_tokens, model_window, positive, prompts, stream_answer

log = logging.getLogger(__name__)


DEFAULT_RATIO = 1.8  # model tokens per cl100k token when the server has no tokenizer (SmolLM2 measured 1.4-1.8)
ANSWER_SHARE = 0.25  # the answer takes at most this share of the window
CHAT_OVERHEAD = 48  # model tokens of the chat template around the two messages (role markers, BOS)
WINDOW_MARGIN = 0.04  # of the window, kept free for what the estimates miss
_SHRINK_FLOOR = 256  # the pipeline's smallest budget
_PACK_CEILING = 4000  # and its largest


class LLMContextTooSmall(LLMError):
    """The server refused the prompt as longer than its window, also after the pack was shrunk."""

    code = "llm_context_too_small"


@dataclass
class Plan:
    """How one ``ask`` is sized: the window, the answer's room, the model/cl100k ratio and the pack's budget."""

    window: int
    window_source: str
    answer_tokens: int
    ratio: float
    ratio_source: str
    system_tokens: int
    pack_tokens: int  # the pack's budget in cl100k tokens

    def as_dict(self) -> dict:
        return {"window": self.window, "windowSource": self.window_source, "answerTokens": self.answer_tokens,
                "ratio": round(self.ratio, 3), "ratioSource": self.ratio_source, "systemTokens": self.system_tokens,
                "packTokens": self.pack_tokens}


def answer_settings(settings: Settings, profile: str | None, root=None) -> tuple[int, float]:
    """(answer tokens, temperature) for ``ask``: the profile's ``maxAnswerTokens`` and ``temperature``, the answer
    tokens overridden by ``llm_answer_tokens`` when that is set."""
    from localidx.retrieve.profiles import get_profile

    _name, table = get_profile(profile or settings.profile, root)
    generation = table.get("generation") or {}
    tokens = positive(generation.get("maxAnswerTokens")) or int(prompts()["answer"].get("max_tokens", 1024))
    if settings.llm_answer_tokens > 0:
        tokens = int(settings.llm_answer_tokens)
    try:
        temperature = float(generation.get("temperature", 0.0))
    except (TypeError, ValueError):
        temperature = 0.0
    return tokens, min(max(temperature, 0.0), 2.0)


def plan_ask(settings: Settings, answer_tokens: int, window: Window | None = None,
             sample: str | None = None) -> Plan:
    """The sizes of one ``ask``: the answer's room is taken from the window (at most ``ANSWER_SHARE`` of it), then
    the system prompt, the chat template and a margin; what is left, divided by the model/cl100k ratio (measured on
    ``sample`` with the server's tokenizer when it has one), is the pack's cl100k budget."""
    from localidx.text import tokens

    window = window or model_window(settings)
    answer = max(16, min(int(answer_tokens), int(window.tokens * ANSWER_SHARE)))
    system = prompts()["answer"]["system"]
    ratio, ratio_source = DEFAULT_RATIO, "default"
    text = sample or system
    measured = model_tokens(settings, text)
    cl100k = tokens.count(text)
    if measured and cl100k >= 8 and (sample or measured / cl100k > DEFAULT_RATIO):
        # Prose (the system prompt) splits coarser than code: only a finer split than the default is taken from it.
        ratio, ratio_source = max(0.5, measured / cl100k), "the server's tokenizer"
    system_tokens = model_tokens(settings, system) if measured else None
    system_tokens = system_tokens or int(tokens.count(system) * ratio) + 1
    room = window.tokens - answer - system_tokens - CHAT_OVERHEAD - int(window.tokens * WINDOW_MARGIN)
    return Plan(window.tokens, window.source, answer, ratio, ratio_source, system_tokens, max(0, int(room / ratio)))


_CTX_WORDS = re.compile(r"context (?:length|size|window)|maximum context|too (?:long|large)|exceed|n_ctx|"
                        r"requested \d+ tokens|prompt is too|input tokens", re.I)


def context_refusal(message: str) -> dict | None:
    """Whether a server's error message says the prompt did not fit its window, with what figures it gives
    (``window``, ``prompt``, ``completion``): llama-cpp-python and vLLM ("maximum context length is 4096 tokens.
    However, you requested 5655 tokens (4631 in the messages, 1024 in the completion)"), llama-server ("the request
    exceeds the available context size", ``n_ctx``/``n_prompt_tokens``), LM Studio, Ollama. None when it is another
    error."""
    if not _CTX_WORDS.search(message):
        return None
    figures: dict = {}
    for key, pattern in (("window", r"(?:maximum context length is|context length of(?: only)?|n_ctx\D{0,4})"
                                    r"\s*(\d+)"),
                         ("prompt", r"(\d+) (?:tokens )?in the messages|n_prompt_tokens\D{0,4}(\d+)|"
                                    r"request has (\d+) input tokens|prompt (?:is|has) (\d+) tokens"),
                         ("completion", r"(\d+) in the completion")):
        found = re.search(pattern, message, re.I)
        if found:
            figures[key] = int(next(g for g in found.groups() if g))
    return figures


@dataclass
class AskResult:
    """What ``ask_pack`` did: the pack answered from, the answer (None on failure) and the error, the plan, the
    attempts, the times, and the citations checked against the pack."""

    pack: dict | None = None
    answer: str | None = None
    error: LLMError | None = None
    plan: Plan | None = None
    attempts: list = field(default_factory=list)
    first_token_s: float | None = None
    total_s: float = 0.0
    streamed: bool = False
    cited: list = field(default_factory=list)  # 1-based numbers of the pack's excerpts the answer cites
    invented: list = field(default_factory=list)  # citations that are not in the pack, as written

    def error_dict(self) -> dict | None:
        if self.error is None:
            return None
        return {"code": getattr(self.error, "code", "llm_error"), "message": str(self.error)}


def ask_pack(settings: Settings, build, *, answer_tokens: int, temperature: float, max_tokens: int | None = None,
             on_text=None, on_send=None, clock=None) -> AskResult:
    """Build a pack that fits the model's window with ``build(max_tokens) -> pack``, stream the answer to it
    (``on_text(str)`` gets each piece as it arrives; ``on_send(attempt)`` is told each request before it goes) and
    check its citations.

    ``max_tokens`` (the user's ``--max-tokens``) is the pack's budget when given; else the plan's. A context-length
    refusal shrinks the pack by the server's figures and tries once more; then ``LLMContextTooSmall`` names the
    settings to change. LLM failures are returned in ``AskResult.error`` with the pack, never raised; the pack's own
    errors (no index, bad arguments) are raised."""
    import time

    clock = clock or time.monotonic
    result = AskResult()
    started = clock()
    window = model_window(settings)
    plan = plan_ask(settings, answer_tokens, window)

    def fit(budget: int, rebuilds: int) -> tuple[dict, str, int]:
        # The pack as built, counted in the model's tokens where the server can: a pack over the room (a tokenizer
        # finer than planned, or a pack over its budget) is rebuilt smaller before anything is sent.
        pack = build(budget)
        instructions = _instructions(pack)
        grown = False
        for _rebuild in range(rebuilds):
            cl100k = _prompt_tokens(pack, instructions)
            measured = model_tokens(settings, instructions)
            if measured and cl100k >= 8:
                plan.ratio, plan.ratio_source = measured / cl100k, "the server's tokenizer"
            if (measured or cl100k * plan.ratio) <= _room(plan, margin=False):
                # A tokenizer coarser than planned leaves room: the pack grows once, when the budget had cut it.
                wider = min(_PACK_CEILING, _refit(plan, budget, cl100k))
                if not measured or grown or wider < budget * 1.15 or cl100k < budget * 0.8:
                    break
                grown, budget = True, wider
            elif budget <= _SHRINK_FLOOR:
                break
            else:
                budget = min(budget - 1, _refit(plan, budget, cl100k))
            pack = build(budget)
            instructions = _instructions(pack)
        return pack, instructions, budget

    budget = max(_SHRINK_FLOOR, int(max_tokens) if max_tokens else plan.pack_tokens)
    pack, instructions, budget = fit(budget, 0 if max_tokens else 2)
    result.pack = pack
    plan.pack_tokens = budget
    result.plan = plan
    for attempt in (1, 2):
        prompt_tokens = _prompt_tokens(pack, instructions)
        record = {"attempt": attempt, "packTokens": budget, "promptTokens": prompt_tokens, "window": plan.window,
                  "windowSource": plan.window_source, "answerTokens": plan.answer_tokens}
        result.attempts.append(record)
        if on_send:
            on_send(dict(record))
        try:
            reply, stats = stream_answer(settings, instructions, max_tokens=plan.answer_tokens,
                                         temperature=temperature, on_text=on_text, clock=clock)
        except LLMError as exc:
            figures = context_refusal(str(exc)) if getattr(exc, "http_status", 0) in (400, 413, 500) else None
            record["error"] = str(exc)
            if figures is None:
                result.error = exc
                break
            if attempt == 2:
                result.error = LLMContextTooSmall(
                    f"{exc} — the pack was shrunk once and still did not fit: lower --max-tokens, or set "
                    f"llm_context_tokens to the model's real window (planned with {plan.window}, "
                    f"{plan.window_source})")
                result.error.http_status = exc.http_status
                break
            plan.window = figures.get("window") or plan.window
            plan.window_source = "the server's refusal" if figures.get("window") else plan.window_source
            plan.answer_tokens = min(plan.answer_tokens, int(plan.window * ANSWER_SHARE))
            sent = figures.get("prompt") or int(prompt_tokens * plan.ratio) + plan.system_tokens + CHAT_OVERHEAD
            if figures.get("prompt") and prompt_tokens >= 8:
                plan.ratio = max(plan.ratio, (sent - plan.system_tokens - CHAT_OVERHEAD) / prompt_tokens)
                plan.ratio_source = "the server's refusal"
            budget = max(_SHRINK_FLOOR, min(int(budget * 0.9), _refit(plan, budget, prompt_tokens)))
            log.info("ask: the server refused %d tokens for a window of %d; retrying with a pack of %d", sent,
                     plan.window, budget)
            pack, instructions, budget = fit(budget, 2)
            result.pack = pack
            plan.pack_tokens = budget
            continue
        record.update(stats)
        result.answer = reply
        result.first_token_s = stats.get("firstTokenS")
        result.streamed = bool(stats.get("streamed"))
        result.cited, result.invented = check_citations(reply, pack)
        break
    result.total_s = clock() - started
    return result


def _room(plan: Plan, margin: bool = True) -> int:
    """Model tokens the user message may take: the window less the answer, the system prompt, the chat template and
    (``margin``) ``WINDOW_MARGIN``."""
    room = plan.window - plan.answer_tokens - plan.system_tokens - CHAT_OVERHEAD
    return room - (int(plan.window * WINDOW_MARGIN) if margin else 0)


def _refit(plan: Plan, budget: int, prompt_cl100k: int) -> int:
    """The budget whose pack fits the room: the room in cl100k tokens less what the pack took beyond its budget
    (the question, the instructions around the excerpts)."""
    over = max(0, prompt_cl100k - budget)
    return max(_SHRINK_FLOOR, int(_room(plan) / plan.ratio) - over)


def _instructions(pack: dict) -> str:
    instructions = (pack.get("instructions") or pack.get("augmentedPrompt") or "").strip()
    if not instructions:
        raise UsageError("nothing to ask: the context pack has no instructions")
    return instructions


def _prompt_tokens(pack: dict, instructions: str) -> int:
    from localidx.text import tokens

    stated = (pack.get("stats") or {}).get("promptTokens")
    return int(stated) if isinstance(stated, int) and stated > 0 else tokens.count(instructions)


_NUMBERED = re.compile(r"(?<![\w\])])\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\]")  # not args[0]
_PLACE = re.compile(r"(?<![\w/.:-])((?:[\w.-]+:)?[\w./-]*\w\.[A-Za-z]\w{0,7}):(\d{1,7})(?:\s*[-–]\s*(\d{1,7}))?")


def check_citations(answer: str, pack: dict) -> tuple[list[int], list[str]]:
    """(the 1-based numbers of the pack's excerpts the answer cites, the citations it makes that the pack does not
    hold). Cited: an ``[n]`` marker, or a ``path:start-end`` inside excerpt n. Not in the pack: an ``[n]`` past the
    last excerpt, a path no excerpt comes from, lines outside every excerpt of that path."""
    matches = pack.get("matches") or []
    cited: set[int] = set()
    invented: list[str] = []
    for group in _NUMBERED.finditer(answer):
        for number in re.split(r"\s*[,;]\s*", group.group(1)):
            n = int(number)
            if 1 <= n <= len(matches):
                cited.add(n)
            elif f"[{n}]" not in invented:
                invented.append(f"[{n}]")
    for place in _PLACE.finditer(answer):
        path, start = place.group(1), int(place.group(2))
        end = int(place.group(3) or start)
        written = f"{path}:{start}" + (f"-{end}" if place.group(3) else "")
        same_file = [n for n, m in enumerate(matches, 1) if _same_path(path, m)]
        inside = [n for n in same_file if matches[n - 1]["start_line"] <= min(start, end)
                  and max(start, end) <= matches[n - 1]["end_line"]]
        if inside:
            cited.update(inside)
        elif written not in invented:
            invented.append(written)
    return sorted(cited), invented


def _same_path(path: str, match: dict) -> bool:
    where = match.get("path") or ""
    full = f"{match['repo']}:{where}" if match.get("repo") else where
    path = path.lstrip("./")
    return path in (where, full) or (len(path) > 3 and "/" in path and where.endswith("/" + path))
