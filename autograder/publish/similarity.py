"""Which submissions look copied: winnowing fingerprints (Schleimer, Wilkerson
and Aiken, "Winnowing: local algorithms for document fingerprinting", SIGMOD
2003, the method of MOSS), over Python tokens for code and over words for
writeup.md. docs/grading.md, "Similar submissions", is the instructor's guide;
docs/decisions.md says why this is written here rather than taken from
copydetect.

A document is a token sequence. Code is lexed by one regular expression
(`CODE_TOKEN`: Python's token classes; `tokenize` itself took 5x longer, see
docs/performance.md), and normalised so that renaming cannot hide a copy and
per-student variants cannot hide one either: every identifier becomes `V`
(keywords, builtins and attribute names after a dot are kept: they are the
language and the APIs, which a copy cannot rename), every number `N`, every
string `S`; comments are dropped. Words of a writeup are lower-cased and
numbers become `N`.

Every run of K tokens (a k-gram) is hashed (blake2b, 64 bits, the same in
every process); in each window of W consecutive hashes the smallest (the
rightmost on ties) is a fingerprint. So a match of at least K + W - 1 tokens
is always found, and none shorter than K ever is. Fingerprints that also
occur anywhere in the base code (the course's stubs, which everyone starts
from), or in more than COMMON_SHARE of a class of at least COMMON_MIN
(an idiom everyone writes, a helper the handout shows), are left out.

A pair's score for `a` is the share of a's fingerprints also found in b's,
and the other way round for `b` (a short submission wholly inside a long one
scores high on its side only). A pair is flagged when either side's score,
for code or for the writeup, is at least the threshold and they share at
least MIN_SHARED fingerprints of that kind. A flag is evidence for a person
to weigh, never a verdict.
"""
from __future__ import annotations

import builtins
import hashlib
import keyword
import re
from collections import defaultdict, deque
from dataclasses import dataclass, field
from itertools import combinations

DEFAULT_THRESHOLD = 0.5      # either side's score at or above this flags the pair
CODE_K, CODE_W = 20, 8       # code: matches of 20 tokens may be found, of 27 always are
WORDS_K, WORDS_W = 6, 4      # writeup: matches of 6 words may be found, of 9 always are
MIN_SHARED = 8               # fewer shared fingerprints than this never flags (a coincidence, a tiny file)
COMMON_SHARE, COMMON_MIN = 0.1, 20   # in more than 10% of a class of 20 or more: everyone's, not a copy

CODE_TOKEN = re.compile(r'''
 (?P<comment>\#[^\r\n]*)
|(?P<string>[rRbBuUfF]{0,2}(?:"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'))
|(?P<number>(?:\d|\.\d)[\w.]*(?:[eE][-+]?\d+)?j?)
|(?P<name>[^\W\d]\w*)
|(?P<op>\*\*=?|//=?|->|:=|\.\.\.|<<=?|>>=?|[-+*/%@&|^<>=!]=|[-+*/%@&|^~<>=.,:;()\[\]{}])
''', re.X)
LEXER_VERSION = "lexer 1"    # bump when CODE_TOKEN or the normalisation changes: kept fingerprints are redone
WORD = re.compile(r"[^\W_]+")
KEPT_NAMES = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))


@dataclass
class Document:
    """One submission's normalised tokens, where each came from ((file, line) by
    index), and its fingerprints {hash: [token index, ...]}."""

    tokens: list[str] = field(default_factory=list)
    places: list[tuple[str, int]] = field(default_factory=list)
    prints: dict[int, list[int]] = field(default_factory=dict)


def code_tokens(text: str, file: str, doc: Document) -> None:
    """Append `text`'s normalised Python tokens to `doc` (see the module's docstring)."""
    line, seen = 1, 0
    after_dot = False
    for m in CODE_TOKEN.finditer(text):
        kind, word = m.lastgroup, m.group()
        line += text.count("\n", seen, m.start())
        seen = m.start()
        if kind == "comment":
            continue
        if kind == "name":
            token = word if after_dot or word in KEPT_NAMES else "V"
        else:
            token = {"string": "S", "number": "N"}.get(kind or "", word)
        doc.tokens.append(token)
        doc.places.append((file, line))
        after_dot = word == "."


def word_tokens(text: str, file: str, doc: Document) -> None:
    """Append `text`'s words (lower case, numbers as N) to `doc`, each with its line."""
    for number, row in enumerate(text.splitlines(), 1):
        for m in WORD.finditer(row):
            word = m.group().lower()
            doc.tokens.append("N" if word.isdigit() else word)
            doc.places.append((file, number))


def kgram_hashes(tokens: list[str], k: int) -> list[int]:
    """The 64-bit hash of every run of k tokens, by its first token's index."""
    if len(tokens) < k:
        return []
    data = "\x1f".join(tokens).encode()
    starts, at = [], 0
    for t in tokens:
        starts.append(at)
        at += len(t.encode()) + 1
    starts.append(at)
    return [int.from_bytes(hashlib.blake2b(data[starts[i]:starts[i + k] - 1], digest_size=8).digest(), "big")
            for i in range(len(tokens) - k + 1)]


def winnow(hashes: list[int], w: int) -> dict[int, list[int]]:
    """{fingerprint: [index, ...]}: the smallest hash of every window of w (rightmost on ties), each
    index once. A text shorter than one window keeps its smallest hash. One pass, the window's
    candidates kept in a deque of rising hashes."""
    chosen: dict[int, list[int]] = defaultdict(list)
    rising: deque[int] = deque()
    last = -1
    for i, h in enumerate(hashes):
        while rising and hashes[rising[-1]] >= h:
            rising.pop()
        rising.append(i)
        if rising[0] <= i - w:
            rising.popleft()
        if i >= w - 1 and rising[0] != last:
            last = rising[0]
            chosen[hashes[last]].append(last)
    if hashes and len(hashes) < w:
        chosen[hashes[rising[0]]].append(rising[0])
    return dict(chosen)


def fingerprinted(doc: Document, k: int, w: int) -> Document:
    doc.prints = winnow(kgram_hashes(doc.tokens, k), w)
    return doc


def code_document(files: dict[str, str], k: int = CODE_K, w: int = CODE_W) -> Document:
    """One submission's code, its files in name order, fingerprinted."""
    doc = Document()
    for name in sorted(files):
        code_tokens(files[name], name, doc)
    return fingerprinted(doc, k, w)


def words_document(sections: dict[str, str], k: int = WORDS_K, w: int = WORDS_W) -> Document:
    """One submission's written answers ({part id: text}), in part order, fingerprinted."""
    doc = Document()
    for name in sorted(sections):
        word_tokens(sections[name], name, doc)
    return fingerprinted(doc, k, w)


def base_hashes(doc: Document, k: int) -> set[int]:
    """Every k-gram hash of the base code (not only its fingerprints): any of them is shared by all."""
    return set(kgram_hashes(doc.tokens, k))


@dataclass(frozen=True)
class Shared:
    """How much of a pair's documents of one kind match: each side's score and the fingerprints shared."""

    score_a: float
    score_b: float
    shared: int


def pair_scores(docs: dict[str, Document], excluded: set[int]) -> tuple[dict[tuple[str, str], Shared], set[int]]:
    """{(a, b): Shared} for every pair that shares a fingerprint, a < b, and the
    fingerprints left out as everyone's (`excluded`, the base, plus those
    common in the class: see the module's docstring)."""
    holders: dict[int, list[str]] = defaultdict(list)
    for name, doc in docs.items():
        for h in doc.prints:
            if h not in excluded:
                holders[h].append(name)
    cap = len(docs) * COMMON_SHARE if len(docs) >= COMMON_MIN else len(docs)
    common = {h for h, names in holders.items() if len(names) > cap}
    own = {name: sum(1 for h in doc.prints if h not in excluded and h not in common) for name, doc in docs.items()}
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for h, names in holders.items():
        if h not in common and len(names) > 1:
            for a, b in combinations(sorted(names), 2):
                counts[(a, b)] += 1
    scores = {pair: Shared(n / own[pair[0]], n / own[pair[1]], n) for pair, n in counts.items()}
    return scores, excluded | common


def flagged(shared: Shared | None, threshold: float) -> bool:
    return shared is not None and shared.shared >= MIN_SHARED and max(shared.score_a, shared.score_b) >= threshold


def matched_lines(a: Document, b: Document, left_out: set[int], k: int) -> tuple[dict, dict]:
    """The lines of each side that a shared fingerprint's k tokens span:
    ({file: {line, ...}} of a, the same of b): the matching regions."""
    def lines(doc: Document, hashes) -> dict[str, set[int]]:
        marked: dict[str, set[int]] = defaultdict(set)
        for h in hashes:
            for start in doc.prints[h]:
                for file, line in doc.places[start:start + k]:
                    marked[file].add(line)
        return dict(marked)
    both = {h for h in a.prints if h in b.prints and h not in left_out}
    return lines(a, both), lines(b, both)
