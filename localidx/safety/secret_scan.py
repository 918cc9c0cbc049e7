"""Finding secrets in text: the spans of a text that hold a secret, and the kind of each. ``localidx.safety.redact``
replaces what is found here; everything else reaches this module through it.

Invariants:
- Detection is data: ``_PATTERNS`` is a table of (kind, compiled regex, secret group, cheap hints, extra check), and
  the "secret-looking name = literal" rule is the ``_SECRET_NAMES`` table plus ``_looks_secret``. No per-kind branches.
- The common case is cheap: one regex pass over the lower-cased text finds every hint and keyword at once; a text
  with none costs that pass and nothing more.
- Time is linear in the text, whatever it holds: no regex backtracks over a run it cannot end in (atomic groups,
  lookbehinds after a literal, a command word found by binary search instead of a lazy scan), a name is read once
  however many keywords it holds, and a keyword inside a blank-free value already read is part of that value.
  ``benchmarks/redaction.py --worst-cases`` crafts a line per pattern and name. ``redact`` also takes a deadline
  (``RedactionTimeout``, raised here): the chunker gives each pass over a file ``parse_timeout_s``.
- Its cost per character is bounded too: a line holding a hint or secret name every 64 characters or closer (16 or
  more; no line of the real code measured does, ``_dense_lines``) is replaced whole by ``«redacted:dense-secrets»``
  instead of being read name by name, and no long literal is read piece by piece: every crafted line runs at 5 MB/s
  or more. (Many short lines that each hold a real secret still cost their per-secret reading: about 1 MB/s.)

Kinds: aws_access_key, aws_secret_key, private_key (PEM blocks, PuTTY ``.ppk`` private lines, age keys),
github_token, gitlab_token, slack_token, slack_webhook, discord_webhook, azure_key (``AccountKey=``,
``SharedAccessKey=``, a SAS ``sig=``), sendgrid_key, mailgun_key, mailchimp_key, shopify_token, pypi_token,
square_token, telegram_token, databricks_token, digitalocean_token, vault_token, google_oauth, atlassian_token,
huggingface_token, postman_key, linear_key, nuget_key, stripe_key, anthropic_key, openai_key, google_api_key,
npm_token, whsec_ and Twilio, Entra ID client secrets, the prefixed tokens of 22 more providers (Grafana, Doppler,
Pulumi, Sentry, Figma, Notion, PlanetScale, Dynatrace, New Relic, Supabase, Groq, Replicate, Perplexity, Mapbox,
Tailscale, Brevo, Contentful, EasyPost, Shippo, Clojars, Prefect, Slack apps), jwt, basic_auth (``Basic <base64 of
user:pw>``), connection_string (the password of ``scheme://user:pw@host`` only), password on a command line
(``mysql -pPW``, ``sshpass -p PW``, ``--password=PW``, ``curl -u user:PW``), ``.netrc`` and ``.pgpass`` lines, PHP ``define('DB_PASSWORD', ...)``, setters
(``setPassword("...")``), a Terraform secret variable's ``default``, a kubeconfig's ``client-key-data``, token
(``Bearer <token>``), from assignments password, secret, token, api_key, and dense-secrets (a whole line
made of secret names, above). The shapes
are written from the providers' published token formats.

What counts as a secret value in an assignment (``password = "..."``, ``"token": "..."``, ``API_KEY=...``, YAML
``secret: ...``): a literal of at least 8 characters, without whitespace, that is not a placeholder (``<your-token>``,
``${TOKEN}``, ``xxx``, ``changeme``), not a URL or path, not made of plain words (``password_field = "password"``,
``token = self.token_value``), not a bare number or a code reference (``key: crypto.PrivateKey,``), and whose Shannon entropy is at least ``min(3.0, log2(len) - 0.5)``
bits a character (3.0 is out of reach for 8-character strings, whose maximum is exactly 3.0). So
``password = "changeme"`` is left alone (a well-known placeholder, and a plain word), while ``password = "hunter22"``
is redacted. Calls and expressions (``token = get_token()``, ``os.environ["X"]``) are never literals and never match.
"""

from __future__ import annotations

import bisect
import math
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable

# Everything str.splitlines() breaks on; a redacted span keeps exactly these characters so line numbers hold.
LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
_NOT_LINE_BREAKS = re.compile("[^" + "".join(sorted(LINE_BREAKS)) + "]+")


class RedactionTimeout(Exception):
    """Redaction ran past its deadline: the text cannot be said to be free of secrets, so none of it may be kept."""


def deadline_after(seconds: float) -> float | None:
    """A ``time.monotonic()`` deadline ``seconds`` from now for ``redact``; None (no limit) for 0 or less."""
    return time.monotonic() + seconds if seconds > 0 else None


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise RedactionTimeout("redaction took too long")


@dataclass(frozen=True)
class _Pattern:
    kind: str
    regex: re.Pattern
    group: int | tuple[int, ...]  # the group holding the secret (the first that matched, of several); 0 = the whole match
    hints: tuple[str, ...]  # lower-case literals, one of which must occur in the lower-cased text for the regex to run
    check: Callable[[str], bool] | None = None  # a further test on the secret text
    # The match may not follow a word character or "-" (a token's prefix must start a word). Checked after the
    # match, not as a leading lookbehind: a regex that starts with a literal is searched for by the engine's fast
    # literal scan, one that starts with a lookbehind is tried at every position (10 to 60 times slower).
    bounded: bool = False
    after: _Context | None = None  # what must come before the match, as the command or block it is part of
    name: int = 0  # a group holding the name the value is given to, which must look secret (``env_kind``); 0: none


@dataclass(frozen=True)
class _Context:
    """A match counts only after a match of ``regex`` with none of ``breaks`` between them: ``-pPW`` after a
    ``mysql`` in the same command, ``default = "..."`` inside a Terraform variable whose name says secret.

    Read with two sorted lists and a binary search per match (``_in_context``): a lazy ``mysql.*?-p`` regex tried
    from every ``mysql`` of a line cost quadratic time.
    """

    regex: re.Pattern
    breaks: re.Pattern
    check: Callable[[re.Match], bool] | None = None  # a further test on the context's match


def _in_context(context: _Context, text: str, at: int, cache: dict) -> bool:
    found = cache.get(context)
    if found is None:
        ends = [m.end() for m in context.regex.finditer(text) if context.check is None or context.check(m)]
        found = cache[context] = (ends, [m.start() for m in context.breaks.finditer(text)])
    ends, breaks = found
    i = bisect.bisect_right(ends, at) - 1
    if i < 0:
        return False
    j = bisect.bisect_right(breaks, at) - 1
    return j < 0 or breaks[j] < ends[i]


def _letters_and_digits(value: str) -> bool:
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _real_password(value: str) -> bool:
    # "user:password@", "myuser:mypassword@" (also percent-encoded: "passwor%64") in docs and examples are not secrets.
    from urllib.parse import unquote

    return not _is_placeholder(value) and "password" not in unquote(value).lower()


def _basic_decoded(value: str) -> str | None:
    """``value`` decoded as base64 of ``user:password`` (what HTTP Basic authentication sends), or None."""
    import base64
    import binascii

    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    return decoded if ":" in decoded else None


def _basic_placeholder(value: str) -> bool:
    """Whether ``value`` is base64 of ``user:password`` whose password is a placeholder (documentation's example)."""
    decoded = _basic_decoded(value)
    return decoded is not None and _is_placeholder(decoded.partition(":")[2])


def _basic_credentials(value: str) -> bool:
    """Whether ``value`` is base64 of ``user:password`` with a real password."""
    decoded = _basic_decoded(value)
    password = decoded.partition(":")[2] if decoded is not None else ""
    return bool(password) and decoded.isprintable() and not _is_placeholder(password)


_CLI_VALUE = r"""([^\s'"-][^\s'"]*|'[^'\r\n]+'|"[^"\r\n]+")"""  # a command-line word, bare or quoted


def _command_line_password(value: str) -> bool:
    """A password where a command line puts one (``-pPW``, ``-u user:PW``, ``--password=PW``): the place says it is
    one, so any literal counts that is not a placeholder, a variable or a word for "password"."""
    value = value.strip("'\"")
    lowered = value.lower()
    if len(value) < 4 or value[0] in "$%{<[(" or _is_placeholder(value):
        return False
    return not any(word in lowered for word in ("pass", "pwd", "secret", "token"))


def _defined_value(value: str) -> bool:
    """A literal given to a secret-looking name in a call (``define('AUTH_KEY', '...')``): blanks allowed (WordPress
    salts have them), placeholders and plain words not."""
    return len(value) >= 8 and not _is_placeholder(value) and not _plain_words(value)


def _random_token(value: str) -> bool:
    """A bearer token or a command-line password: not a placeholder, not a variable, not plain words."""
    return _looks_secret(value.strip("'\""))


_COMMAND_BREAK = re.compile(r"[\r\n|;&]")
# A command word that starts a word (``mysqldump``, ``mariadb-client`` too), for the options that follow it.
_COMMAND = {
    "mysql": _Context(re.compile(r"(?:mysql(?<![\w-]mysql)|mariadb(?<![\w-]mariadb))[\w-]*"), _COMMAND_BREAK),
    "curl": _Context(re.compile(r"curl(?<![\w-]curl)\b"), _COMMAND_BREAK),
}

# Ordered most specific first: where two matches overlap, the earlier row wins (an ``sk-ant-`` key inside
# ``api_key = "..."`` is reported as anthropic_key, not api_key).
_PATTERNS: tuple[_Pattern, ...] = (
    _Pattern(
        "private_key",
        # Unterminated blocks run to the end of the text; the lookahead asks for key material (base64 or a PEM
        # header such as Proc-Type:) after the BEGIN line, so code that only names the marker is not swallowed.
        re.compile(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"(?=(?:\s|\\[nr])*(?:[A-Za-z0-9+/=]{16}|[A-Za-z-]+:[ \t]))"
            r"(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
        ),
        0,
        ("-----begin",),
    ),
    _Pattern(
        "aws_access_key",
        re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
        0,
        ("akia", "asia"),
    ),
    _Pattern(
        "aws_secret_key",
        re.compile(
            r"(?i:aws_?secret(?:_?access)?_?key)[\"']?\s*(?::=|=>|=|:)\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
        1,
        ("secret",),
    ),
    _Pattern(
        "github_token",
        re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
        0,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        bounded=True,
    ),
    _Pattern("gitlab_token", re.compile(r"glpat-[A-Za-z0-9_-]{20,}"), 0, ("glpat-",), bounded=True),
    _Pattern("slack_token", re.compile(r"xox[abprs]-[A-Za-z0-9-]{10,}"), 0, ("xox",), bounded=True),
    _Pattern(
        "stripe_key",
        re.compile(r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"),
        0,
        ("sk_live_", "rk_live_", "sk_test_", "rk_test_"),
        bounded=True,
    ),
    _Pattern("anthropic_key", re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}"), 0, ("sk-",), bounded=True),
    _Pattern("openai_key", re.compile(r"sk-[A-Za-z0-9_-]{20,}"), 0, ("sk-",), _letters_and_digits, bounded=True),
    _Pattern("google_api_key", re.compile(r"AIza[0-9A-Za-z_-]{35}(?![\w-])"), 0, ("aiza",), bounded=True),
    _Pattern("npm_token", re.compile(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), 0, ("npm_",), bounded=True),
    _Pattern(
        "jwt",
        # The lookbehind after the literal keeps "eyJ" inside a run from starting a match: a line of "eyJeyJ..."
        # made the engine scan the whole run from every "eyJ" in it (quadratic).
        re.compile(r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
        0,
        ("eyj",),
        bounded=True,
    ),
    _Pattern(
        "private_key",
        # PuTTY's .ppk: the private half is the base64 lines after "Private-Lines: N", and the MAC after them.
        re.compile(r"(?m)^Private-Lines:[ \t]*\d+[ \t]*\r?\n((?:[A-Za-z0-9+/=]+[ \t]*(?:\r?\n|\Z))+)"
                   r"(?:Private-(?:MAC|Hash):[ \t]*[0-9a-fA-F]+)?"),
        0,
        ("private-lines:",),
    ),
    _Pattern("private_key", re.compile(r"AGE-SECRET-KEY-1[0-9A-Z]{58}(?![0-9A-Z])"), 0,
             ("age-secret-key-1",), bounded=True),
    _Pattern(
        "slack_webhook",
        re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/-]{20,})"),
        1,
        ("hooks.slack.com/",),
    ),
    _Pattern("discord_webhook", re.compile(r"discord(?:app)?\.com/api/webhooks/\d+/([A-Za-z0-9_-]{30,})"), 1,
             ("/api/webhooks/",)),
    _Pattern(
        "azure_key",
        # Storage and Service Bus connection strings, and the signature of a shared access signature URL.
        re.compile(r"(?i:accountkey|sharedaccesskey)=([A-Za-z0-9+/]{30,}={0,2})|[?&]sig=([A-Za-z0-9%+/]{30,}={0,2})"),
        (1, 2),
        ("accountkey=", "sharedaccesskey=", "sig="),
    ),
    _Pattern("sendgrid_key", re.compile(r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,50}"), 0, ("sg.",),
             bounded=True),
    _Pattern("mailgun_key", re.compile(r"key-[0-9a-f]{32}(?![0-9a-f])"), 0, ("key-",), bounded=True),
    _Pattern("shopify_token", re.compile(r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"), 0,
             ("shpat_", "shpca_", "shppa_", "shpss_"), bounded=True),
    _Pattern("pypi_token", re.compile(r"pypi-AgE[A-Za-z0-9_-]{50,}"), 0, ("pypi-age",), bounded=True),
    _Pattern("square_token", re.compile(r"(?:sq0atp-[0-9A-Za-z_-]{22}|sq0csp-[0-9A-Za-z_-]{43}|"
                                        r"EAAA[A-Za-z0-9_-]{60})"), 0, ("sq0atp-", "sq0csp-", "eaaa"),
             bounded=True),
    _Pattern("telegram_token", re.compile(r"(?<![\w:])\d{8,10}:AA[0-9A-Za-z_-]{33}(?![\w-])"), 0, (":aa",)),
    _Pattern("databricks_token", re.compile(r"dapi[0-9a-f]{32}(?:-\d)?(?![0-9a-f])"), 0, ("dapi",), bounded=True),
    _Pattern("digitalocean_token", re.compile(r"do[opr]_v1_[a-f0-9]{64}"), 0, ("dop_v1_", "doo_v1_", "dor_v1_"),
             bounded=True),
    _Pattern("vault_token", re.compile(r"(?:hv[sbr]\.[A-Za-z0-9_-]{24,}|[A-Za-z0-9]{14}\.atlasv1\."
                                       r"[A-Za-z0-9_=-]{60,})"), 0, ("hvs.", "hvb.", "hvr.", ".atlasv1."),
             bounded=True),
    _Pattern("google_oauth", re.compile(r"(?:GOCSPX-[A-Za-z0-9_-]{28}|ya29\.[0-9A-Za-z_-]{30,})"), 0,
             ("gocspx-", "ya29."), bounded=True),
    _Pattern("atlassian_token", re.compile(r"ATATT3[A-Za-z0-9_=-]{100,}"), 0, ("atatt3",), bounded=True),
    _Pattern("huggingface_token", re.compile(r"hf_[A-Za-z0-9]{34,}(?![A-Za-z0-9])"), 0, ("hf_",),
             _letters_and_digits, bounded=True),
    _Pattern("postman_key", re.compile(r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"), 0, ("pmak-",), bounded=True),
    _Pattern("linear_key", re.compile(r"lin_api_[A-Za-z0-9]{40}"), 0, ("lin_api_",), bounded=True),
    _Pattern("nuget_key", re.compile(r"oy2[a-z0-9]{43}(?![a-z0-9])"), 0, ("oy2",), _letters_and_digits,
             bounded=True),
    _Pattern("gitlab_token", re.compile(r"gl(?:ptt|dt|rt|cbt|oas|soat|imt|agent|ffct)-[A-Za-z0-9_-]{20,}"),
             0, ("glptt-", "gldt-", "glrt-", "glcbt-", "gloas-", "glsoat-", "glimt-", "glagent-", "glffct-"),
             bounded=True),
    _Pattern(
        "basic_auth",
        # An HTTP Basic credential anywhere (a header, a curl -H, a config line): base64 that decodes to user:pw.
        re.compile(r"(?:Basic|basic|BASIC)[ \t]+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"),
        1,
        ("basic ", "basic\t"),
        _basic_credentials,
        bounded=True,
    ),
    _Pattern(
        "token",
        re.compile(r"(?:Bearer|bearer|BEARER)[ \t]+([A-Za-z0-9._~+/-]{16,}=*)(?![A-Za-z0-9._~+/=-])"),
        1,
        ("bearer ", "bearer\t"),
        _random_token,
        bounded=True,
    ),
    # A password on a command line: mysql -pPASSWORD (no blank: -p alone prompts), sshpass -p PW, --password=PW,
    # curl -u user:PW (the part after the colon).
    _Pattern("password", re.compile(r"[ \t]-p(?!assword)" + _CLI_VALUE), 1, ("mysql", "mariadb"),
             _command_line_password, after=_COMMAND["mysql"]),
    _Pattern("password", re.compile(r"sshpass[ \t]+-p[ \t]*" + _CLI_VALUE), 1, ("sshpass",), _command_line_password,
             bounded=True),
    _Pattern("password", re.compile(r"--password[= ]" + _CLI_VALUE), 1, ("--password",), _command_line_password),
    _Pattern("password", re.compile(r"[ \t](?:-u|--user)[ \t]*['\"]?[^\s:'\"]*:([^\s'\"]+)"), 1, ("curl",),
             _command_line_password, after=_COMMAND["curl"]),
    # -- more shapes people commit: provider tokens by their published prefixes and lengths, then the places a
    # password sits in without a "name = value" of its own.
    # A hint may be any piece of what it wakes: "hsec_" for "whsec_" spares the every-text pass a new first letter.
    _Pattern("stripe_key", re.compile(r"whsec_[A-Za-z0-9+/=]{24,}"), 0, ("hsec_",), bounded=True),
    _Pattern("twilio_key", re.compile(r"(?:AC|SK)[0-9a-f]{32}(?![0-9A-Za-z])"), 0, ("twilio",), bounded=True),
    _Pattern("azure_key", re.compile(r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"), 0, ("q~",),
             bounded=True),  # an Entra ID (Azure AD) client secret
    _Pattern("grafana_token", re.compile(r"glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"), 0,
             ("glc_", "glsa_"), bounded=True),
    _Pattern("doppler_token", re.compile(r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,44}"), 0,
             ("dp.pt.", "dp.st.", "dp.ct.", "dp.sa.", "dp.scim.", "dp.audit."), bounded=True),
    _Pattern("pulumi_token", re.compile(r"pul-[a-f0-9]{40}(?![a-f0-9])"), 0, ("pul-",), bounded=True),
    _Pattern("sentry_token", re.compile(r"sntryu_[a-f0-9]{64}|sntrys_[A-Za-z0-9+/=_]{50,}"), 0,
             ("sntryu_", "sntrys_"), bounded=True),
    _Pattern("figma_token", re.compile(r"figd_[A-Za-z0-9_-]{38,}"), 0, ("gd_",), bounded=True),
    _Pattern("notion_token", re.compile(r"ntn_[0-9]{11}[A-Za-z0-9]{35}(?![A-Za-z0-9])"), 0, ("ntn_",), bounded=True),
    _Pattern("planetscale_token", re.compile(r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.-]{32,64}"), 0, ("pscale_",),
             bounded=True),
    _Pattern("dynatrace_token", re.compile(r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}"), 0, ("dt0c01.",), bounded=True),
    _Pattern("newrelic_key", re.compile(r"NRAK-[A-Z0-9]{27}(?![A-Z0-9])"), 0, ("nrak-",), bounded=True),
    _Pattern("supabase_token", re.compile(r"sbp_[a-f0-9]{40}(?![a-f0-9])"), 0, ("sbp_",), bounded=True),
    _Pattern("slack_token", re.compile(r"xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]{16,}"), 0, ("xapp-",), bounded=True),
    _Pattern("groq_key", re.compile(r"gsk_[A-Za-z0-9]{52}(?![A-Za-z0-9])"), 0, ("gsk_",), bounded=True),
    _Pattern("replicate_token", re.compile(r"r8_[A-Za-z0-9]{37}(?![A-Za-z0-9])"), 0, ("r8_",), bounded=True),
    _Pattern("perplexity_key", re.compile(r"pplx-[A-Za-z0-9]{48}(?![A-Za-z0-9])"), 0, ("pplx-",), bounded=True),
    _Pattern("mapbox_token", re.compile(r"sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}"), 0, ("sk.eyj",),
             bounded=True),
    _Pattern("tailscale_key", re.compile(r"tskey-(?:api|auth|client|webhook)-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}"), 0,
             ("tskey-",), bounded=True),
    _Pattern("sendinblue_key", re.compile(r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}"), 0, ("xkeysib-",), bounded=True),
    _Pattern("contentful_token", re.compile(r"CFPAT-[A-Za-z0-9_-]{43}"), 0, ("cfpat-",), bounded=True),
    _Pattern("easypost_key", re.compile(r"EZ[AT]K[A-Za-z0-9]{54}"), 0, ("ezak", "eztk"), bounded=True),
    _Pattern("shippo_token", re.compile(r"shippo_(?:live|test)_[a-f0-9]{40}"), 0, ("shippo_",), bounded=True),
    _Pattern("clojars_token", re.compile(r"CLOJARS_[a-z0-9]{60}"), 0, ("clojars_",), bounded=True),
    _Pattern("prefect_key", re.compile(r"pnu_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), 0, ("pnu_",), bounded=True),
    # A kubeconfig's client key (base64 of a PEM block).
    _Pattern("private_key", re.compile(r"client-key-data:[ \t]*[\"']?([A-Za-z0-9+/=]{20,})"), 1, ("client-key-data",)),
    # PHP's define('DB_PASSWORD', '...') and WordPress's keys and salts: the name is a string, so no "name = value".
    _Pattern("secret", re.compile(r"define\([ \t]*['\"]([A-Za-z0-9_]+)['\"][ \t]*,[ \t]*(?:'([^'\\\r\n]+)'|"
                                  r"\"([^\"\\\r\n]+)\")"), (2, 3), ("define(",), _defined_value, name=1),
    # A setter given a literal: ds.setPassword("..."), builder.setApiKey('...'), client.set_token("...").
    _Pattern("password", re.compile(r"set_?(?:[Pp]ass(?:word|wd)|[Ss]ecret|[Cc]lient_?[Ss]ecret|(?:[Aa]uth_?)?[Tt]oken|"
                                    r"[Aa]pi_?[Kk]ey|[Aa]ccess_?[Kk]ey|[Cc]redentials?)\([ \t]*(?:\"([^\"\\\r\n]+)\"|"
                                    r"'([^'\\\r\n]+)')"), (1, 2),
             ("password", "passwd", "secret", "token", "apikey", "api_key", "accesskey", "access_key", "clientsecret",
              "client_secret", "credential", "credentials"), _random_token, bounded=True),
    # Terraform: the default of a variable whose name says secret (variable "db_password" { default = "..." }).
    _Pattern("password", re.compile(r"default(?<![\w-]default)[ \t]*=[ \t]*\"([^\"\\\r\n]+)\""), 1, ('ariable "',),
             _random_token,
             after=_Context(re.compile(r"variable[ \t]+\"([\w-]+)\""), re.compile(r"\}"),
                            lambda m: env_kind(m.group(1)) is not None)),
    # .netrc syntax in a file of any name: machine HOST login USER password PW (on one line or several).
    _Pattern("password", re.compile(r"password[ \t]+([^\s]+)"), 1, ("machine",), _random_token, bounded=True,
             after=_Context(re.compile(r"machine(?<![\w-]machine)[ \t]+[^\s]+"), re.compile(r"(?!)"))),
    # .pgpass syntax in a file of any name: host:port:database:user:password, one entry a line.
    _Pattern("password", re.compile(r"(?m)^[^:\s#]+:(?:\d{1,5}|\*):[^:\s]*:[^:\s]*:([^\s]+)(?=\r?$)"), 1,
             (":5432:", ":*:"), _command_line_password),
    _Pattern(
        "connection_string",
        # Starts at "://" so the regex engine can jump between literal hits; only the password is the secret.
        re.compile(r"://[^\s:/@\"'<>\[\]]*:([^\s@/\"'<>\[\]]+)@(?=[^\s/\"'<>@])"),
        1,
        ("://",),
        _real_password,
    ),
)

# Names whose literal value is a secret, with the kind reported. "?" stands for an optional separator ("api?key":
# api_key, api-key, apikey). The keyword must end a word of the name (``auth_token``, ``authToken``; not ``author``).
_SECRET_NAMES: tuple[tuple[str, str], ...] = (
    ("client?secret", "secret"),
    ("secret", "secret"),
    ("secrets", "secret"),
    ("password", "password"),
    ("passwords", "password"),
    ("passwd", "password"),
    ("passphrase", "password"),
    ("pass", "password"),  # db_pass, SMTP_PASS, dbPass: a word of its own only (never bypass, compass)
    ("pwd", "password"),
    ("pw", "password"),  # db_pw, SMTP_PW, dbPw: a word of its own only, like "pass"
    ("api?key", "api_key"),
    ("access?key", "api_key"),
    ("private?key", "secret"),
    ("encryption?key", "secret"),
    ("signing?key", "secret"),
    ("master?key", "secret"),
    ("credential", "secret"),
    ("credentials", "secret"),
    ("token", "token"),
    ("authorization", "token"),
    ("auth", "token"),
)


def _spellings(name: str) -> list[str]:
    if "?" not in name:
        return [name]
    head, tail = name.split("?", 1)
    return [head + sep + rest for sep in ("_", "-", "") for rest in _spellings(tail)]


_NAME_KINDS: dict[str, str] = {spelling: kind for name, kind in _SECRET_NAMES for spelling in _spellings(name)}

# After the keyword: the rest of the identifier, an optional closing quote (JSON/dict keys), an optional type word
# (Go's ``var token string = ...``), then an assignment operator.
# A quoted key takes no type word: in ``class="token" href="#x"`` the quoted word is a value, not a key.
# The rest of the name is read whole, never given back (an atomic group, written so that Python 3.10 has it too):
# backtracking into a long name made a line of ``TOKEN_TOKEN_...`` cost cubic time.
_NAME_TAIL = re.compile(r"(?=(?P<rest>[\w-]*))(?P=rest)(?:(?P<q>[\"'])[ \t]*|[ \t]*(?:[A-Za-z_][\w\[\].*]*[ \t]*)?)"
                        r"(?P<op>:=|=>|=|:)")
# After ``name:`` a type annotation may come before the real ``=`` (Python, TypeScript, Kotlin, Rust): its
# characters, read as one run (``_annotation_end`` looks at what ends it).
_ANNOTATION = re.compile(r"[ \t]*[A-Za-z_&*][\w\[\]., \t|&*<>?]*")
_BLANK = re.compile(r"\s")
_VALUE = re.compile(
    r"[ \t]*(?:\"(?P<dq>(?:[^\"\\\r\n]|\\.)*)\"|'(?P<sq>(?:[^'\\\r\n]|\\.)*)'|`(?P<bq>[^`\r\n]*)`"
    # A bare value may not start with what YAML reserves (& anchor, * alias, ! tag, | > blocks) or an operator.
    # A bare value ends at a backslash too: inside a string literal that is an escape (\n), not part of the value.
    # A bare value ends at "&" too: in a query string (token=abc&user=x) the next parameter is not part of it.
    r"|(?P<bare>[^\s\"'`,;()\[\]{}<>=&*!|%@\\][^\s\"'`,;()\[\]{}<>\\&]*)(?=[\s,;\\&\"'`]|$))"
)

# The last word of a name that says the value describes a secret rather than being one (token_type, secret_name).
_DESCRIPTIVE_SUFFIXES = frozenset(
    "type types url urls uri endpoint path file filename dir name names field fields header headers env var "
    "length len size count max min limit prefix suffix format pattern regex label hint placeholder help message "
    "msg error text title description kind mode method scheme algorithm alg version ttl expiry expires timeout "
    "param params column table id ids arn identifier query".split()
)
_PLACEHOLDER_WORDS = frozenset(
    "password passwd pass pwd secret token changeme change_me changeit none null nil undefined true false "
    "redacted hidden masked".split()
)
_PLACEHOLDER_MARKERS = (
    "your", "example", "placeholder", "changeme", "change_me", "replace", "dummy", "redacted", "filtered", "xxxx",
    "****", "...",
    "\u2026", "todo", "fixme", "insert",
)
_PLACEHOLDER = re.compile(
    r"^(?:<[^>]*>|\$\{[^}]*\}|\$\(?[A-Za-z_]\w*\)?|\{\{.*\}\}|\{[\w.]*\}|%\(?\w*\)?[sd]|(.)\1*)$", re.DOTALL
)
_TEMPLATE_BITS = ("${", "{{", "%(", "%s", "{}", "#{", "\\(")  # ... and Swift's "\(value)"
_TEMPLATE = re.compile(r"<[^<>]*>|^[\w.]+\(.*\)$")  # <username>, or a call written in backticks: `get_token()`
_IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*$")
_AUTH_SCHEME = re.compile(r"(?i)(?:bearer|basic|token|digest)[ \t]+")
_CAMEL_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_SEPARATORS = re.compile(r"[/._\-:@+]+")
_NUMBER = re.compile(r"^[\d.,_]+$")
_TYPE_UNION = re.compile(r"^[A-Za-z_][\w.\[\]<>]*(?:\|[A-Za-z_][\w.\[\]<>]*)+$")  # string|null: a documented type
_VOWELS = frozenset("aeiouy")


def _trie_regex(words: list[str]) -> str:
    """An alternation of literals shaped as a trie (``a(?:kia|sia|uth)``).

    The regex engine tries the alternatives of a flat alternation one by one at every position; as a trie it
    tests one character and at most one branch, which makes the every-file pre-check two to three times faster.
    """
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def walk(node: dict) -> str:
        branches = [re.escape(ch) + walk(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = "(?:" + "|".join(branches) + ")"
        return body + "?" if "" in node else body

    return walk(trie)


# The one pass every text pays for: lower-case it, then find every pattern hint and secret-name keyword at once.
# Longer literals win where one continues another ("secrets" over "secret"), as the trie's optional tails are greedy.
# hint -> the positions in _PATTERNS of the patterns it wakes (ints: cheaper to collect than the patterns themselves)
_HINT_PATTERNS: dict[str, tuple[int, ...]] = {
    hint: tuple(i for i, p in enumerate(_PATTERNS) if hint in p.hints) for hint in {h for p in _PATTERNS for h in p.hints}
}
_TRIGGER = re.compile(_trie_regex(sorted(set(_HINT_PATTERNS) | set(_NAME_KINDS))))
_ENV_SPLIT = re.compile(r"[_.\-]+")
# Key parts that make a .env value secret, with the kind reported. A part may also end in one of five letters or
# more (DBPASSWORD, GHTOKEN); shorter ones must be the whole part, or BYPASS and MONKEY would count.
_ENV_KEY_PARTS: tuple[tuple[str, str], ...] = (
    ("PASSWORD", "password"),
    ("PASSWD", "password"),
    ("PASS", "password"),
    ("PWD", "password"),
    ("PASSPHRASE", "password"),
    ("SECRET", "secret"),
    ("SECRETS", "secret"),
    ("TOKEN", "token"),
    ("AUTH", "token"),
    ("APIKEY", "api_key"),
    ("KEY", "api_key"),
    ("CREDENTIAL", "secret"),
    ("CREDENTIALS", "secret"),
    ("PRIVATE", "secret"),
    ("SALT", "secret"),
    ("DSN", "connection_string"),
)
_ENV_URL_KEYS = ("DATABASE_URL", "DB_URL", "REDIS_URL", "MONGO_URL", "MONGODB_URI", "AMQP_URL", "BROKER_URL",
                 "CONNECTION_STRING", "CONN_STR")


def env_kind(key: str) -> str | None:
    """The kind of secret a ``.env`` key names (``PASSWORD``, ``DATABASE_URL``), or None when it names none."""
    upper = key.upper()
    if any(upper.endswith(k) for k in _ENV_URL_KEYS):
        return "connection_string"
    parts = _ENV_SPLIT.split(upper)
    if parts[-1].lower() in _DESCRIPTIVE_SUFFIXES:
        return None
    for part in parts:
        for word, kind in _ENV_KEY_PARTS:
            if part == word or (len(word) >= 5 and part.endswith(word)):
                return kind
    return None


def find_secrets(text: str, deadline: float | None = None) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, kind) spans of secrets, in text order."""
    if not text:
        return []
    lowered = text.lower()
    if len(lowered) != len(text):
        # Lower-casing lengthened some non-ASCII character and offsets would drift: lower character by character.
        lowered = "".join(c.lower()[0] for c in text)
    hits = list(_TRIGGER.finditer(lowered))
    spans: list[tuple[int, int, str]] = []
    if len(hits) >= _DENSE_MIN_HITS:
        # A URL's "://" costs a fraction of a name (the connection-string regex passes it over unless it holds
        # user:pw@) and real lines are full of them (a README's row of badges): four count as one hit.
        if "://" in lowered:
            urls = [m.start() for m in hits if m.group() == "://"]
            starts = sorted([m.start() for m in hits if m.group() != "://"] + urls[::4])
        else:
            starts = [m.start() for m in hits]
        spans = _dense_lines(text, starts)
        if spans:
            # A dense line goes whole: blanked (offsets kept), nothing else is looked for in it.
            text, lowered = _blanked(text, spans), _blanked(lowered, spans)
            hits = list(_TRIGGER.finditer(lowered))
    patterns: set[int] = set()
    keywords: list[tuple[int, int, str]] = []
    for m in hits:
        literal = m.group()
        patterns.update(_HINT_PATTERNS.get(literal, ()))
        if literal in _NAME_KINDS:
            keywords.append((m.start(), m.end(), _NAME_KINDS[literal]))
    contexts: dict = {}
    for i, pattern in enumerate(_PATTERNS):  # table order: the more specific pattern claims a span first
        if i not in patterns:
            continue
        _check(deadline)
        found = []
        for m in pattern.regex.finditer(text):
            if pattern.bounded and m.start() and (text[m.start() - 1].isalnum() or text[m.start() - 1] in "_-"):
                continue
            if pattern.after is not None and not _in_context(pattern.after, text, m.start(), contexts):
                continue
            if pattern.name and env_kind(m.group(pattern.name)) is None:
                continue
            group = pattern.group if isinstance(pattern.group, int) else next(
                (g for g in pattern.group if m.group(g) is not None), 0)
            start, end = m.span(group)
            if start < end and (pattern.check is None or pattern.check(text[start:end])):
                found.append((start, end, pattern.kind))
        spans = merge_spans(spans, found)
    _check(deadline)
    return merge_spans(spans, _assignments(text, keywords, deadline))


# A line with at least this many hints and secret names, one every 64 characters or closer on average, is redacted
# whole: no person writes dozens of ``password=`` in a row, and reading each costs microseconds of Python (such a
# line ran at under 1 MB/s). On real code the densest line of 16 hits or more holds 4 per KB (setuptools' generated
# schema validators); shorter lines are never dense, their cost is bounded by their few hits.
_DENSE_MIN_HITS = 16
_DENSE_PER_KB = 16
DENSE_KIND = "dense-secrets"


def _dense_lines(text: str, hits: list[int]) -> list[tuple[int, int, str]]:
    """The ``\\n``-delimited lines holding too many ``hits`` (sorted offsets) to read one by one, as (start, end,
    kind) spans without their final ``\\n``. Linear: each line with a hit is found by one ``rfind``/``find`` from
    its first hit, and its hits counted by a binary search."""
    window = _DENSE_MIN_HITS - 1
    # A dense line of k hits spans at most 1024 * k / _DENSE_PER_KB characters, so some 16 hits in a row on it lie
    # within twice what 16 may span on average: text without such a run (all real code) costs this one look.
    reach = 2 * 1024 * _DENSE_MIN_HITS // _DENSE_PER_KB
    if not any(b - a <= reach for a, b in zip(hits, hits[window:])):
        return []
    spans: list[tuple[int, int, str]] = []
    i, n = 0, len(hits)
    while i + _DENSE_MIN_HITS <= n:
        at = hits[i]
        end = text.find("\n", at)
        if end < 0:
            end = len(text)
        if hits[i + window] >= end:  # too few hits on this line: skip them
            i = bisect.bisect_left(hits, end, i)
            continue
        start = text.rfind("\n", 0, at) + 1
        j = bisect.bisect_left(hits, end, i)
        if (j - i) * 1024 >= _DENSE_PER_KB * (end - start):
            spans.append((start, end, DENSE_KIND))
        i = j
    return spans


def _blanked(text: str, spans: list[tuple[int, int, str]]) -> str:
    """``text`` with each span's characters blanked but its line breaks kept: offsets and line numbers hold."""
    pieces: list[str] = []
    pos = 0
    for start, end, _kind in spans:
        pieces.append(text[pos:start])
        pieces.append(_NOT_LINE_BREAKS.sub(lambda m: " " * len(m.group()), text[start:end]))
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


def _assignments(text: str, keywords: list[tuple[int, int, str]],
                 deadline: float | None = None) -> list[tuple[int, int, str]]:
    """The values assigned to secret-looking names: a (start, end, kind) span per accepted keyword.

    Linear in the text whatever it holds: a name is read once however many keywords it holds (``TOKEN_TOKEN_...``),
    its start is found without walking back over the same characters twice, and a keyword inside a value already
    read without blanks (``token:token:token``) is part of that value, not a name of its own.
    """
    spans: list[tuple[int, int, str]] = []
    names: dict[int, _Named | None] = {}  # name start -> what follows the name (None: no assignment)
    last_kw, last_start = -1, 0
    covered = -1  # keywords before this offset lie inside a blank-free value already read
    for n, (kw_start, kw_end, kind) in enumerate(keywords):
        if not n % 512:
            _check(deadline)
        if kw_start < covered or not _keyword_ends_word(text, kw_start, kw_end):
            continue
        name_start = kw_start
        while name_start > 0 and (text[name_start - 1].isalnum() or text[name_start - 1] in "_-"):
            name_start -= 1
            if name_start == last_kw:  # the previous keyword is in the same name: its start is this one's
                name_start = last_start
                break
        last_kw, last_start = kw_start, name_start
        keyword = text[kw_start:kw_end].lower()
        if keyword in _WORD_START_KEYWORDS and not (_keyword_starts_word(text, kw_start) and name_start < kw_start):
            continue
        if name_start not in names:
            names[name_start] = _read_named(text, name_start, kw_end)
        named = names[name_start]
        if named is None:
            continue
        if named.unbroken:
            covered = max(covered, named.end)
        if named.accepted(keyword):
            spans.append((named.start, named.end, kind))
    return spans


@dataclass
class _Named:
    """The literal assigned to a name, with the checks that do not depend on which keyword of the name matched."""

    start: int
    end: int
    value: str  # the literal (an auth scheme word before it taken off)
    lowered: str
    raw_lowered: str  # the literal as written, scheme included, lower-cased
    reference: bool  # a bare identifier that may be code naming something (``_is_reference``)
    unbroken: bool  # no blank inside: a keyword inside it is part of it
    ok: bool  # it looks secret, whichever keyword named it

    def accepted(self, keyword: str) -> bool:
        if not self.ok:
            return False
        if self.reference and keyword.replace("_", "").replace("-", "") in self.raw_lowered:
            return False
        # A value that names its own keyword is not one: token = "&_token=".
        return not (len(keyword) >= 4 and keyword in self.lowered)


def _read_named(text: str, name_start: int, kw_end: int) -> _Named | None:
    tail = _NAME_TAIL.match(text, kw_end)
    if tail is None:
        return None
    if _last_word(text[name_start : tail.end("rest")]) in _DESCRIPTIVE_SUFFIXES:
        return None
    # A quoted key must be the whole string ("password": ...), not the tail of one ("AWS::IAM::AccessKey": ...).
    if tail.group("q") and text[name_start - 1 : name_start] != tail.group("q"):
        return None
    pos = tail.end("op")
    value = None
    if tail.group("op") == ":":
        annotation = _annotation_end(text, pos)
        if annotation is not None:
            value = _VALUE.match(text, annotation)
    if value is None:
        value = _VALUE.match(text, pos)
    if value is None:
        return None
    group = value.lastgroup
    start, end = value.span(group)
    raw = text[start:end]
    unbroken = _BLANK.search(raw) is None
    reference = False
    if group == "bare":
        stripped = raw.rstrip("?!")  # Swift's and Kotlin's optional types, TypeScript's non-null assertion
        if _IDENTIFIER.match(stripped):
            if "." in stripped or text[end : end + 1] in (",", ";"):
                return _Named(start, end, raw, "", "", False, unbroken, False)
            reference = True
    raw_lowered = raw.rstrip("?!").lower()
    ok = True
    scheme = _AUTH_SCHEME.match(text, start, end)
    if scheme is not None:
        start = scheme.end()
        if scheme.group().lower().startswith("basic") and _basic_placeholder(text[start:end]):
            ok = False
    value_text = text[start:end]
    lowered = value_text.lower()
    if ok and (not _looks_secret(value_text) or ("|" in value_text and _TYPE_UNION.match(value_text))):
        ok = False
    name = text[name_start : tail.end("rest")].lower()
    if ok and len(name) >= 4 and name in lowered:  # "next-auth": "npm:next-auth@^4.2"
        ok = False
    return _Named(start, end, value_text, lowered, raw_lowered, reference, unbroken, ok)


def _annotation_end(text: str, pos: int) -> int | None:
    """Where a type annotation after ``name:`` ends with its ``=`` (``token: str = "..."``), or None.

    The blank before "=" tells ``token: str = "..."`` from a YAML value that holds "=" (``secret: c2VjcmV0==``).
    Read as one run of annotation characters and a look at what ends it: no backtracking over blanks.
    """
    run = _ANNOTATION.match(text, pos)
    if run is None:
        return None
    end = run.end()
    if text[end : end + 1] == "=" and text[end - 1] in " \t" and text[end + 1 : end + 2] not in ("=", ">"):
        return end + 1
    return None


# Keywords that must start a word of the name, after another word: db_pass, SMTP_PASS, dbPass; not bypass, compass,
# or the prose of "first pass: ..." and a log's "index pass: reason=...".
_WORD_START_KEYWORDS = frozenset({"pass", "pw"})


def _keyword_starts_word(text: str, start: int) -> bool:
    """Whether the keyword starts a word of the identifier: ``db_pass``, ``dbPass``, ``PASS``; not ``bypass``."""
    if start == 0 or not text[start - 1].isalpha():
        return True
    return text[start - 1].islower() and text[start].isupper()


def _keyword_ends_word(text: str, start: int, end: int) -> bool:
    """Whether the keyword ends a word of the identifier: ``auth_token``, ``authToken``, not ``author``."""
    if end >= len(text):
        return True
    after = text[end]
    if after.islower():
        return False
    return not (after.isupper() and text[start:end].isupper())


def _last_word(name: str) -> str:
    words = _CAMEL_PART.findall(name.replace("-", "_"))
    return words[-1].lower() if words else ""


_LONG_VALUE = 4096


def _looks_secret(value: str) -> bool:
    """Whether a literal assigned to a secret-looking name is itself a secret (see the module docstring)."""
    if len(value) < 8 or _BLANK.search(value):
        return False
    if len(value) > _LONG_VALUE:
        return True  # a key or a blob: no word, placeholder or path is that long, and reading it for one costs ms
    if _NUMBER.match(value) or _is_placeholder(value):
        return False
    if "://" in value or value.startswith(("/", "./", "../", "~/", "arn:")):
        return False
    if _plain_words(value):
        return False
    return _entropy(value) >= min(3.0, math.log2(len(value)) - 0.5)


def _is_placeholder(value: str) -> bool:
    lowered = value.lower()
    if _PLACEHOLDER.match(value) or lowered in _PLACEHOLDER_WORDS or _TEMPLATE.search(value):
        return True
    return any(m in lowered for m in _PLACEHOLDER_MARKERS) or any(t in value for t in _TEMPLATE_BITS)


def _plain_words(value: str) -> bool:
    """Whether ``value`` is built from words (``auth_token``, ``X-Auth-Token``, ``self.value``, ``oauth2_scheme``).

    Letters glued to a run of two or more digits (``hunter22``, ``admin123``) do not count as words: that is how
    people make passwords. Nor does a literal over 1 KB: no name is that long, and reading one piece by piece cost
    seconds per MB (``token=:a@:a@...``).
    """
    if len(value) > 1024:
        return False
    for segment in _SEPARATORS.split(value):
        if not segment:
            continue
        parts = _CAMEL_PART.findall(segment)
        if "".join(parts) != segment:
            return False
        numbers = [p for p in parts if p.isdigit()]
        words = [p for p in parts if not p.isdigit()]
        if not words:
            if len(segment) > 4:
                return False
            continue
        if any(len(n) > 1 for n in numbers):
            return False
        if len(segment) <= 2:
            continue
        # Random strings split into many tiny parts (Zx9Qw8Er), words into few longer ones (getUserName).
        if sum(map(len, words)) < 3 * len(words):
            return False
        # ... and a long one into tiny parts among longer ones (nhzAXSSBYZSJtD: Jt, D): names of 12 or more rarely
        # have two.
        if len(segment) >= 12 and sum(len(p) <= 2 for p in parts) >= 2:
            return False
        for word in words:
            acronym = word.isupper() and len(word) <= 5
            # Short vowel-less parts are the abbreviations code is full of: pwd, ctx, Cfg, Hsm, src, tmp.
            abbreviation = word[1:].islower() and len(word) <= 4
            wordy = len(word) >= 2 and (abbreviation or not _VOWELS.isdisjoint(word.lower()))
            if not (acronym or wordy):
                return False
    return True


def _entropy(value: str) -> float:
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def merge_spans(kept: list[tuple[int, int, str]], new: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Add the ``new`` spans that overlap none already kept (earlier claims win); spans stay sorted by start."""
    if not new:
        return kept
    out = list(kept)
    for span in new:
        i = bisect.bisect_left(out, span)
        if (i > 0 and out[i - 1][1] > span[0]) or (i < len(out) and out[i][0] < span[1]):
            continue
        out.insert(i, span)
    return out
