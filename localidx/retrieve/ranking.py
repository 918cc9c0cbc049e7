"""Ranking a question's candidates, and a name's definitions: the rules search applies after fusing its arms.

Place in the flow: retrieve (inside ``search``: after fusion, for a question that is not a pasted report; the name
rules for every name lookup). Pure functions over scores, candidate rows and text; no I/O.

A short question ("null-safe object utility methods", "how data is sent during a transfer") is most often answered
by one file, and that file is often named for the thing asked; the fused chunk scores alone rank a chunk that
mentions the words above the file that is about them. A question's fused score, its best candidate's being 1, then
gains or loses, each rule a share of the best score:

- **Roles**: a chunk of a test, doc, example, built or config file counts ``QUESTION_ROLE_FACTOR`` unless the
  question asks for that kind of file (``search.wanted_roles``).
- **Phrase**: a chunk holding the question's word pairs in order gains ``PHRASE_WEIGHT`` times their share: a
  sentence copied from a doc comment or a message finds where it is written.
- **Mentioned names**: the definition of a name the question writes as code (``ZodObject``, ``res.sendFile``)
  gains ``MENTION_WEIGHT`` (further definitions of the name less), unless the question asks for tests (then it asks
  for the tests of that name).
- **File coherence**: a file's best chunk gains ``COHERENCE`` times its file's summed score (its best
  ``COHERENCE_TOP`` chunks) over the best file's: a file that answers in several places ranks above a lucky chunk
  elsewhere, and a long file's many weak matches do not outweigh one strong one.
- **Path evidence**: every chunk of a file whose stem or directory names the question's words gains
  ``PATH_WEIGHT`` times the share of the question the path names (``path_evidence``), each word weighed by how few
  files it names, and the more of the file's stem the question names the more (``Triple.java`` before
  ``MutableTriple.java`` for "triple container").
- **Named files**: every chunk of a file the question names as a whole (``named_files``: its stem is a name the
  question writes as code, ``absl::string_view`` and ``string_view.h``, or the project's name when the question says
  it, "how nvm installs" and ``nvm.sh``) gains ``STEM_WEIGHT``: a header that only re-exports a type, or one long
  script named for its project, is what such a question asks for.
- **Diversity**: a file's n-th best chunk counts ``FILE_DECAY`` ** (n - 1), so the first matches cover more files.

Measured on the tuning halves only (``benchmarks/eval/shortq``: the peer benchmark's 23 tuning repositories, 460
questions, mostly about files; the generated set's tuning half, 344 questions, mostly about one definition; NDCG@10,
static-minilm), each rule taken out of the final set, peer / generated: roles -0.036 / -0.013, path evidence -0.030 /
+0.013, diversity -0.028 / +0.011, coherence -0.021 / +0.007, a path's unnamed words counted (``UNNAMED_WEIGHT``)
-0.013 / -0.025, mentioned names -0.009 / +0.010, phrase +0.001 / -0.125. The two sets pull apart (a question about
a file wants one match a file; a sentence about a function wants the function, often second in its file): the
constants were chosen on both together, each set kept within about 0.005 of its best. docs/retrieval.md has the
figures before and after.

A name's definitions (``definition_rank``, ``declaration_rank``): source before tests and docs, the kind asked for,
the qualification matched, the case as written, a type before a function of a capitalised name (a class before its
constructor), a C function's body before its prototypes (``declares_only``), the file named for the name (``SqlMapper.cs`` among
the parts of a partial class), a parsed symbol before a declaration found in text; then the search's own score.
"""

from __future__ import annotations

import bisect
import math
import re
from functools import lru_cache
from pathlib import PurePosixPath

QUESTION_ROLE_FACTOR = 0.5  # a test, doc, example, built or config file the question does not ask for (0.3: +0.001)
PHRASE_WEIGHT = 0.75  # times the share of the question's word pairs (not two stopwords) a chunk holds in order
PHRASE_DEPTH = 40  # the best candidates whose text is read for the phrase rule
MENTION_WEIGHT = 0.75  # the first definition of a name the question writes as code
MENTION_DECAY = 0.5  # the n-th further definition of that name counts this to the power n
MENTIONED_DEFINITIONS = 3  # definitions of one mentioned name that gain
MAX_MENTIONED = 3  # names of one question looked up
COHERENCE = 0.5  # times the file's summed score over the best file's, to the file's best chunk
COHERENCE_TOP = 16  # a file's best chunks in its sum (all of them: the 108 hand-written questions R@1 -0.046, a
#   long file's many weak matches outranked the one that answers; 8: Bash's one long script lost 0.06 on the peer set)
PATH_WEIGHT = 1.5  # times the share of the question the path names (1.0 and 2.0: -0.002 to -0.004 on either set)
UNNAMED_WEIGHT = 0.5  # a question's word no path names, in the share's whole, times the largest word weight
MIN_PREFIX = 4  # a word and a path word match when the shorter (at least this long) begins the longer
FILE_DECAY = 0.5  # a file's n-th best chunk counts this to the power n-1 (0.7: peer -0.006, generated +0.01)
STEM_FLOOR = 0.25  # a path's share when the question names none of its stem's words, rising to 1 when all (0.5,
#   0: peer -0.002 and -0.0004, generated -0.0002 and -0.0004)
STEM_WEIGHT = 0.4  # a file the question names as a whole (``named_files``; 0.75: generated set -0.003)

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")


@lru_cache(maxsize=1)
def _english() -> frozenset[str]:
    from localidx import tomlfile

    return frozenset(tomlfile.package_table("localidx", "data/keywords.toml")["stopwords"]["english"])


def question_words(query: str) -> frozenset[str]:
    """The words of a question that can name a file: lower case, split identifiers, no English stopwords, >= 3
    letters."""
    from localidx.chunk.enrich import split_identifier

    stop = _english()
    words = set()
    for token in _WORD.findall(query):
        for word in {token.lower(), *split_identifier(token)}:
            if len(word) >= 3 and word not in stop:
                words.add(word)
    return frozenset(words)


# A verb and its particle, two words in a question and one in code: "shut down" is `shutdown`, "set up" `setup`,
# "look up" `lookup`, "time out" `timeout`, "plug in" `plugin`, "fall back" `fallback`.
PARTICLES = frozenset({"up", "down", "out", "in", "on", "off", "back", "over"})
_WORD_AND_NEXT = re.compile(r"(?<![\w$.])([A-Za-z]{2,})\b(?=[ \t]+([A-Za-z]+)\b)")  # each word and the next


def joined_words(query: str) -> list[str]:
    """The words a question writes apart that code writes as one (``PARTICLES``): "how does the runtime shut down"
    -> ``["shutdown"]``. A stopword before the particle joins nothing ("is in" is not `isin`)."""
    english = _english()
    out = []
    for found in _WORD_AND_NEXT.finditer(query):
        first, second = found.group(1).lower(), found.group(2).lower()
        if second in PARTICLES and first not in english and first not in PARTICLES:
            out.append(first + second)
    return out


@lru_cache(maxsize=1 << 16)
def path_words(path: str) -> frozenset[str]:
    """The words a file's path names it by: its stem's split words (and the stem itself) and its directory's."""
    from localidx.chunk.enrich import split_identifier

    pure = PurePosixPath(path)
    words = {w for part in pure.stem.split(".") for w in (part.lower(), *split_identifier(part))}
    if pure.parent.name:
        words |= {pure.parent.name.lower(), *split_identifier(pure.parent.name)}
    return frozenset(w for w in words if len(w) >= 2)


class PathIndex:
    """The words of every indexed file's path (``path_words``), to find the files a question's words name and how
    many files each word names."""

    def __init__(self, paths):
        from localidx.retrieve.transforms import fold_name

        self.count = 0
        self._files: dict[str, set[str]] = {}
        self._stems: dict[str, set[str]] = {}
        for path in paths:
            self.count += 1
            self._stems.setdefault(fold_name(PurePosixPath(path).stem), set()).add(path)
            for word in path_words(path):
                self._files.setdefault(word, set()).add(path)
        self._vocabulary = sorted(self._files)

    def files(self, word: str) -> set[str]:
        """The files whose path words match ``word``: the same word, or one that begins the other when the shorter
        has at least ``MIN_PREFIX`` letters ("render" and "rendering", "handler" and "handlers")."""
        found = set(self._files.get(word, ()))
        if len(word) >= MIN_PREFIX:
            at = bisect.bisect_left(self._vocabulary, word)
            while at < len(self._vocabulary) and self._vocabulary[at].startswith(word):
                found |= self._files[self._vocabulary[at]]
                at += 1
            for end in range(MIN_PREFIX, len(word)):
                found |= self._files.get(word[:end], set())
        return found

    def named(self, name: str) -> set[str]:
        """The files whose whole stem is ``name``, case and separators aside (``StrCat``: ``str_cat.h``), folded as
        a name's home file is for a name query (``transforms.fold_name``)."""
        from localidx.retrieve.transforms import fold_name

        return set(self._stems.get(fold_name(name), ()))


_NOT_ALNUM = re.compile(r"[^a-z0-9]")


def named_files(query: str, mentioned: list[tuple[str, ...]], project: str, index: PathIndex) -> set[str]:
    """The files a question names as a whole: those whose stem is a name it writes as code (``absl::string_view``:
    ``string_view.h``; ``StrCat``: ``str_cat.h``), and, when it says the project's name (``project``, the indexed
    folder's), the file named for the project (``how nvm installs a version``: ``nvm.sh``)."""
    from localidx.retrieve.transforms import fold_name

    names = [parts[-1] for parts in mentioned]
    said = {_NOT_ALNUM.sub("", word.lower()) for word in query.split()}  # "nvm," and "zig-clap" as written
    if _NOT_ALNUM.sub("", project.lower()) in said:
        names.append(project)
    return {path for name in names if len(fold_name(name)) >= 3 for path in index.named(name)}


def path_evidence(words: frozenset[str], index: PathIndex) -> dict[str, float]:
    """The files a question's ``words`` name, each with the share of the question it names, in (0, 1].

    A word counts by how few files it names (``log(1 + files / named)``): ``tex`` naming one file of a thousand is
    strong evidence, ``string`` naming every file under ``strings/`` is weak. A word no path names counts
    ``UNNAMED_WEIGHT`` times the largest weight a word can have: the question asks for it, and no file is named by it.
    A path's share is then scaled by how much of its stem the question names (``stem_coverage``, from
    ``STEM_FLOOR`` to 1): "triple container" names ``Triple.java`` wholly and ``MutableTriple.java`` in part."""
    if not words or not index.count:
        return {}
    weights: dict[str, float] = {}
    named: dict[str, list[str]] = {}
    for word in sorted(words):
        files = index.files(word)
        if files:
            weights[word] = math.log(1.0 + index.count / len(files))
            for path in files:
                named.setdefault(path, []).append(word)
    if not named:
        return {}
    unnamed = len(words) - len(weights)
    total = sum(weights.values()) + unnamed * UNNAMED_WEIGHT * math.log(1.0 + index.count)
    return {path: sum(weights[w] for w in found) / total
            * (STEM_FLOOR + (1 - STEM_FLOOR) * stem_coverage(path, words)) for path, found in named.items()}


def _word_matches(word: str, other: str) -> bool:
    """Two words match when equal, or when the shorter, at least ``MIN_PREFIX`` letters, begins the longer (the
    rule ``PathIndex.files`` applies over the whole vocabulary at once)."""
    short, long = sorted((word, other), key=len)
    return short == long or len(short) >= MIN_PREFIX and long.startswith(short)


@lru_cache(maxsize=65536)
def _stem_names(path: str) -> tuple[tuple[str, ...], ...]:
    """The words a file's stem names it by; a file whose stem may stand for its directory (``__init__.py``,
    ``index.ts``, ``mod.rs``, but also a module called ``index.py``) is named by its directory as well."""
    from localidx.chunk.enrich import split_identifier
    from localidx.store.relations import is_package_file

    pure = PurePosixPath(path)
    stems = [pure.stem] + ([pure.parent.name] if is_package_file(pure.stem) and pure.parent.name else [])
    return tuple(tuple(w for part in stem.split(".") for w in split_identifier(part) if len(w) >= 2)
                 for stem in stems)


def stem_coverage(path: str, words: frozenset[str]) -> float:
    """The share of a file stem's words that the question's ``words`` name: ``Triple.java`` is wholly named by
    "triple container", ``MutableTriple.java`` half; ``observers/__init__.py`` by "which observer is picked"."""
    shares = [sum(any(_word_matches(w, s) for w in words) for s in stem) / len(stem)
              for stem in _stem_names(path) if stem]
    return max(shares, default=1.0)


def role_factor(row: dict, wanted_roles: frozenset) -> float:
    """What a question's chunk of ``row``'s file counts: 1 for code, less for a test, doc, example, built copy or
    config file unless the question asks for that kind (``QUESTION_ROLE_FACTOR``)."""
    from localidx.retrieve.transforms import path_role

    role = path_role(row["path"], row.get("language") or "")
    return 1.0 if not role or role in wanted_roles else QUESTION_ROLE_FACTOR


_PHRASE_WORD = re.compile(r"[a-z0-9]+")


def phrase_share(query: str, text: str) -> float:
    """The share of the question's consecutive word pairs that the text holds in the same order (lower case,
    punctuation aside): a sentence taken from a doc comment or a message finds where it is written."""
    words = _PHRASE_WORD.findall(query.lower())
    stop = _english()
    pairs = {(a, b) for a, b in zip(words, words[1:]) if not (a in stop and b in stop)}  # not "of the"
    if not pairs:
        return 0.0
    found = _PHRASE_WORD.findall(text.lower())
    return len(pairs & set(zip(found, found[1:]))) / len(pairs)


def mentioned_names(query: str) -> list[tuple[str, ...]]:
    """The names a question writes as code (``ZodObject``, ``res.sendFile``, ``absl::string_view``), as name parts,
    at most ``MAX_MENTIONED``."""
    from localidx.retrieve.transforms import analyze, name_parts

    out = []
    for ident in analyze(query).identifiers:
        parts = name_parts(ident)
        if parts and parts not in out:
            out.append(parts)
    return out[:MAX_MENTIONED]


def mentioned_weights(mentioned: list[list[tuple]], scores: dict) -> dict:
    """For each name a question mentions (its definitions as ``(rank key, key)``, see ``definition_rank``), its
    best definitions: key -> weight, 1 for the first, ``MENTION_DECAY`` ** n for the n-th after it, at most
    ``MENTIONED_DEFINITIONS`` per name."""
    weights: dict = {}
    for defined in mentioned:
        defined = sorted(_prototypes_after_bodies(defined), key=lambda item: (item[0][:_RANK_KEY], -scores.get(item[1], 0.0),
                                                     item[0][_RANK_KEY:]))
        chosen = list(dict.fromkeys(key for _rank, key in defined))[:MENTIONED_DEFINITIONS]
        for n, key in enumerate(chosen):
            weights[key] = max(weights.get(key, 0.0), MENTION_DECAY ** n)
    return weights


def rank_question(scores: dict, rows: dict, evidence: dict, wanted_roles: frozenset,
                  mentioned: list[list[tuple]] = (), phrases: dict | None = None,
                  named: frozenset = frozenset()) -> dict:
    """A question's scores (after ``role_factor``) with the definitions of the names it mentions, path evidence,
    file coherence and diversity. Keys are (source label, chunk id); ``evidence``: (source label, path) -> the
    share of the question the path names (``path_evidence``); ``mentioned``: for each name the question writes as
    code, its definitions as ``(rank key, key)``; ``named``: (source label, path) of the files named for such a name
    (``named_files``)."""
    if not scores:
        return scores
    top = max(scores.values()) or 1.0
    out = dict(scores)
    if PHRASE_WEIGHT and phrases:
        for key, share in phrases.items():
            out[key] += PHRASE_WEIGHT * top * share * role_factor(rows[key], wanted_roles)
    if MENTION_WEIGHT and mentioned and "test" not in wanted_roles:  # "which tests cover verify_token": its tests
        for key, weight in mentioned_weights(mentioned, scores).items():
            out[key] += MENTION_WEIGHT * top * weight * role_factor(rows[key], wanted_roles)
    if COHERENCE:
        by_file: dict[tuple, list[tuple]] = {}
        for key, value in out.items():
            by_file.setdefault((key[0], rows[key]["path"]), []).append((value, key))
        sums: dict[tuple, float] = {}
        for file, found in by_file.items():
            found.sort(key=lambda item: -item[0])
            sums[file] = sum(value for value, _key in found[:COHERENCE_TOP])
        most = max(sums.values()) or 1.0
        for file, found in by_file.items():
            out[found[0][1]] += COHERENCE * top * sums[file] / most
    if PATH_WEIGHT and evidence:
        for key in out:
            share = evidence.get((key[0], rows[key]["path"]))
            if share:
                out[key] += PATH_WEIGHT * top * share * role_factor(rows[key], wanted_roles)
    if STEM_WEIGHT and named:
        for key in out:
            if (key[0], rows[key]["path"]) in named:
                out[key] += STEM_WEIGHT * top * role_factor(rows[key], wanted_roles)
    if FILE_DECAY < 1.0:
        seen: dict[tuple, int] = {}
        for key in sorted(out, key=lambda key: -out[key]):
            file = (key[0], rows[key]["path"])
            n = seen.get(file, 0)
            seen[file] = n + 1
            out[key] *= FILE_DECAY ** n
    return out


# -- names ------------------------------------------------------------------------------------------------------


def definition_rank(parts: tuple[str, ...], wants: str, row: dict) -> tuple | None:
    """The rank key of a chunk defining the name ``parts`` (lower ranks first), or None when it does not define it.

    In order: source code before tests, docs, examples and built copies; the kind a keyword asks for (``class X``)
    before other kinds; the query's qualification matched (``Client.send``: a ``send`` of ``Client``; leading
    components may name the module's path instead: ``httpx.Client``); the case as written before a case or
    separator variant; for a capitalised name without a keyword, a type before a function of that name (a class
    before its constructor, ``type Engine`` before a method ``Engine()``); the file named for the name before the
    others (``SqlMapper.cs`` before ``SqlMapper.Cache.cs``, parts of one partial class); a parsed symbol before a
    declaration found in text (``declaration_rank``). Then the search's own score decides, then the path and
    line. A variant of another case that starts differently (``into_response``
    for ``IntoResponse``) names something else and is no definition of it."""
    from localidx.retrieve.transforms import fold_name, path_role

    quality = _name_quality(parts, row)
    if quality is None:
        return None
    kind = row["kind"] or ""
    group = _kind_group(kind)  # None for a merged chunk of several symbols: its kinds are its members'
    wrong_kind = bool(wants) and group is not None and group != wants
    role = path_role(row["path"], row["language"] or "")
    name = parts[-1]
    not_type = not wants and name[:1].isupper() and group not in ("type", None)
    not_home = fold_name(PurePosixPath(row["path"]).stem) != fold_name(name)
    return (bool(role), wrong_kind, *quality, not_type, declares_only(name, row), not_home, False, row["path"],
            row["start_line"], row["language"] or "")


@lru_cache(maxsize=256)
def _declaration(name: str) -> re.Pattern:
    from localidx.retrieve.transforms import data

    escaped = re.escape(name)
    return re.compile("|".join(f"(?:{form.replace('{name}', escaped)})" for form in data().declaration_forms),
                      re.MULTILINE)


def declaration_rank(parts: tuple[str, ...], wants: str, row: dict) -> tuple | None:
    """The rank key (as ``definition_rank``'s) of a chunk whose text declares the name ``parts`` in one of the
    forms of ``query.toml``'s ``declaration_forms`` (``open class Session``, ``pub fn parse``, ``type Produced =``),
    or None when it does not: the declarations no parser found (text no grammar reads, a C++ class in a header read
    as C, a TypeScript type alias) are definitions too."""
    from localidx.retrieve.transforms import fold_name, path_role

    found = _declaration(parts[-1]).search(row.get("text") or "")
    if found is None:
        return None
    group = "function" if any(word in _FUNCTION_WORDS for word in found.group(0).split()) else "type"
    role = path_role(row["path"], row["language"] or "")
    name = parts[-1]
    not_type = not wants and name[:1].isupper() and group == "function"
    wrong_kind = bool(wants) and wants != group
    not_home = fold_name(PurePosixPath(row["path"]).stem) != fold_name(name)
    return (bool(role), wrong_kind, 0, 0, not_type, False, not_home, True, row["path"], row["start_line"],
            row["language"] or "")


_FUNCTION_WORDS = frozenset(("def", "defp", "defmacro", "fn", "func", "function", "fun", "sub", "proc", "macro"))
_RANK_KEY = 8  # the part of a definition's rank key that comes before the search's score
_PROTOTYPE = 5  # where the rank key says "a prototype" (``declares_only``)


def _prototypes_after_bodies(defined: list[tuple]) -> list[tuple]:
    """``defined`` (``(rank key, key)``) with the prototype mark kept only where a C-family body of the name is among
    them: a name whose C definition no parser reads (behind a macro) is not put behind another language's
    definition of it (a binding under ``contrib/``) for being a prototype."""
    bodies = (rank for rank, _key in defined if rank[-1] in PROTOTYPE_LANGUAGES)
    if any(not rank[_PROTOTYPE] and not rank[_RANK_KEY - 1] for rank in bodies):  # a parsed C-family body
        return defined
    return [((*rank[:_PROTOTYPE], False, *rank[_PROTOTYPE + 1:]), key) for rank, key in defined]


# Languages where a function's prototype and its definition are one function, declared twice: a header's block of
# prototypes, a file's forward declarations. (A Rust trait's or a Java interface's method without a body is another
# thing than its implementations, and stays ranked by score.)
PROTOTYPE_LANGUAGES = frozenset({"c", "cpp", "objc", "cuda"})
# After a parameter list, what may stand before the body or the `;`: qualifiers, attributes and macros with their
# arguments, a trailing return type, a constructor's initialiser list.
_AFTER_PARAMETERS = re.compile(r"(?:\s+|[\w:<>,*&.\[\]-]+(?:\s*\((?:[^;{}()]|\([^;{}()]*\))*\))?)*")


def declares_only(name: str, row: dict) -> bool:
    """True when ``row`` (a chunk of a C-family language, ``PROTOTYPE_LANGUAGES``) holds the function ``name``'s
    prototype but not its body: ``name(...)`` followed by ``;`` or ``=`` (``= 0;``), and nowhere by ``{``. Such a chunk
    (a header's block of prototypes, a file's forward declarations) ranks after the definition: someone typing a
    function's name wants its code first."""
    text = row.get("text")
    if not text or (row.get("language") or "") not in PROTOTYPE_LANGUAGES:
        return False
    heads = False
    for found in re.finditer(rf"(?<![\w$]){re.escape(name)}\s*\(", text):
        close = _closing_paren(text, found.end() - 1)
        if close is None:
            continue
        after = _AFTER_PARAMETERS.match(text, close + 1, min(len(text), close + 400))
        following = text[after.end():after.end() + 1]
        if following == "{":
            return False
        heads = heads or following in (";", "=")
    return heads


def _closing_paren(text: str, start: int) -> int | None:
    depth = 0
    for at in range(start, min(len(text), start + 2000)):
        char = text[at]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return at
        elif char in ";{}":
            return None
    return None


def definitions_first(scores: dict[tuple, float], defined: list[tuple], limit: int) -> tuple[dict[tuple, float], set]:
    """Scores with a name query's definitions (``(rank key, key)``) above every other match, in rank order (ties:
    the search's own order), at most ``limit`` of them."""
    if not defined:
        return scores, set()
    defined = _prototypes_after_bodies(defined)
    defined.sort(key=lambda item: (item[0][:_RANK_KEY], -scores.get(item[1], 0.0), item[0][_RANK_KEY:]))
    chosen = list(dict.fromkeys(key for _rank, key in defined))[:limit]
    top = max(scores.values(), default=0.0) or 1.0
    out = dict(scores)
    for n, key in enumerate(chosen):
        out[key] = top * (2.0 - n / (2 * limit))  # above top, in order
    return out, set(chosen)


def _name_quality(parts: tuple[str, ...], row: dict) -> tuple[int, int] | None:
    """How well a chunk's symbol names ``parts``: (unmatched qualifiers, 0 for the case as written or 1 for a case
    or separator variant), or None when no symbol of the chunk ends in the name. A variant counts only when the
    query is all lower case (``opendataset``) or the two start with the same case (``HttpServer``, ``HTTPServer``)."""
    from localidx.retrieve.transforms import fold_name, name_parts

    best = None
    path = fold_name(row["path"])
    caseless = parts[-1] == parts[-1].lower()
    for symbol in (row["symbol"] or "").split(", "):
        have = name_parts(symbol)
        if not have:
            continue
        for folded in (False, True):
            norm = fold_name if folded else (lambda text: text)
            if norm(have[-1]) != norm(parts[-1]):
                continue
            if folded and not caseless and have[-1].lstrip("_$")[:1].isupper() != parts[-1].lstrip("_$")[:1].isupper():
                break
            matched = 1
            while matched < len(parts) and matched < len(have) and \
                    norm(have[-1 - matched]) == norm(parts[-1 - matched]):
                matched += 1
            # Qualifiers beyond the symbol's own may name its module: found in the path, they count as matched.
            missing = sum(1 for part in parts[:len(parts) - matched] if fold_name(part) not in path)
            quality = (missing, int(folded))
            best = quality if best is None or quality < best else best
            break
    return best


def _kind_group(kind: str) -> str | None:
    if kind == "group":
        return None
    if kind in ("function", "method", "constructor", "macro"):
        return "function"
    if kind in ("constant", "variable", "field", "property"):
        return "value"
    return "type"
