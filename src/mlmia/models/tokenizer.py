"""The shared WordPiece tokenizer of the embedded world, trained on the union of its corpora.

`train_tokenizer` saves a `transformers` BertTokenizerFast directory (BERT uncased
normalisation). Its vocabulary is learnt by `wordpiece_vocab`: the `tokenizers` trainer's
recipe with its ties broken by an order fixed by the data, so the same in every process (the
trainer's is not: huggingface/tokenizers#1794). With `min_patients` (config
`tokenizer.min_patients`), the merges are learnt only from the words that at least that many
patients' texts hold (`word_patients`): no entry but the characters comes from a word fewer
patients wrote. Loading any tokenizer: `mlmia.models.loading.load_tokenizer`.

Reading sample text (`encode_text`, `content_tokens`): special-token strings written in a
note ("[MASK]", "<mask>", "[PAD]") are read as the characters they are, everywhere text is
scored or counted.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from mlmia.core.errors import UserError
from mlmia.core.logs import get_logger

log = get_logger(__name__)

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def word_counts(texts: Iterable[str]) -> dict[str, int]:
    """How often each word occurs in `texts` after BERT-uncased normalisation and
    pre-tokenization (whitespace and punctuation splits), as the WordPiece model sees them."""
    from tokenizers import pre_tokenizers

    normalizer, pre_tokenizer = bert_normalizer(), pre_tokenizers.BertPreTokenizer()
    counts: dict[str, int] = {}
    for text in texts:
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(str(text))):
            counts[word] = counts.get(word, 0) + 1
    return counts


def word_patients(texts: Iterable[str], groups: Iterable) -> dict[str, int]:
    """How many distinct groups (patients: `groups[i]` wrote `texts[i]`) hold each word of
    `texts`, the words read as `word_counts` reads them."""
    from tokenizers import pre_tokenizers

    normalizer, pre_tokenizer = bert_normalizer(), pre_tokenizers.BertPreTokenizer()
    holders: dict[str, set] = {}
    for text, group in zip(texts, groups, strict=True):
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(str(text))):
            holders.setdefault(word, set()).add(group)
    return {word: len(held) for word, held in holders.items()}


def bert_normalizer():
    from tokenizers import normalizers

    return normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)


def wordpiece_vocab(
    counts: Mapping[str, int],
    vocab_size: int,
    min_frequency: int,
    special_tokens: Sequence[str] = tuple(SPECIAL_TOKENS),
    prefix: str = "##",
    patients: Mapping[str, int] | None = None,
    min_patients: int | None = None,
) -> list[str]:
    """A WordPiece vocabulary learnt from word counts, the same in every process.

    The recipe of the `tokenizers` WordPiece trainer (BPE merges on the words, continuation
    pieces marked with `prefix`), with its ties broken the same way in every process: the
    trainer breaks a tie by the tokens' ids, and numbers the continuation characters in
    hash-map order, so its vocabulary differs from run to run (huggingface/tokenizers#1794).
    Here every token's rank is fixed by the data alone:

    1. the special tokens; every character of the corpus, in code-point order; `prefix` +
       each character that occurs inside a word, in code-point order (all kept, even beyond
       `vocab_size`);
    2. each word is split into its characters (`w`, `##o`, `##r`, `##d`); repeatedly the
       adjacent pair with the most occurrences (word counts summed) is merged into one token
       in every word (left to right), and the merged token (`w` + `##o` -> `wo`,
       `##o` + `##r` -> `##or`) joins the vocabulary with the next rank. Ties: the pair whose
       left token has the lower rank, then its right token (the trainer's rule: older,
       shorter pieces first);
    3. until the vocabulary has `vocab_size` tokens or no pair occurs `min_frequency` times.

    `min_patients` (with `patients`: how many patients' texts hold each word, `word_patients`):
    step 2 runs on the words that at least `min_patients` patients hold, and on no other; step 1
    still takes the characters of every word. So every entry but the characters is a piece of a
    word that `min_patients` patients wrote (a whole-word entry is such a word, or a prefix of
    one), and every word of the corpus still reads without the unknown token. The words left
    out are left out of the pair counts too, rather than merged and their entries pruned
    afterwards: pruning a rare word's entry would keep the pieces its merges made on the way
    ("smit", "##ith" of a surname only one patient has), and the vocabulary would be smaller
    than `vocab_size`; left out, a rare word adds nothing but its characters, and the merges it
    would have taken go to words many patients share. The counts of a word kept are all its
    occurrences, a patient who repeats it counting each time. None: every word.

    Returns the tokens by rank (the order they were added)."""
    import heapq

    vocab: list[str] = []
    rank: dict[str, int] = {}

    def add(token: str) -> int:
        if token not in rank:
            rank[token] = len(vocab)
            vocab.append(token)
        return rank[token]

    for token in special_tokens:
        add(token)
    words = sorted(w for w, c in counts.items() if w and c > 0)
    for ch in sorted({ch for w in words for ch in w}):
        add(ch)
    for ch in sorted({ch for w in words for ch in w[1:]}):
        add(prefix + ch)
    if min_patients is not None:
        if patients is None:
            raise ValueError("wordpiece_vocab: min_patients needs each word's patients")
        words = [w for w in words if patients.get(w, 0) >= int(min_patients)]
    freqs = [int(counts[w]) for w in words]
    symbols = [[rank[w[0]]] + [rank[prefix + ch] for ch in w[1:]] for w in words]

    # pair of ranks -> summed count, and -> the words that hold it (maybe no longer)
    pair_count: dict[tuple[int, int], int] = {}
    where: dict[tuple[int, int], set[int]] = {}
    for i, (syms, f) in enumerate(zip(symbols, freqs)):
        for pair in zip(syms, syms[1:]):
            pair_count[pair] = pair_count.get(pair, 0) + f
            where.setdefault(pair, set()).add(i)
    # max-heap on the count, then min on (left, right) ranks; a pair's entry is stale once its
    # count changed (the new count got its own entry)
    heap = [(-c, a, b) for (a, b), c in pair_count.items()]
    heapq.heapify(heap)
    cut = len(prefix)
    while len(vocab) < vocab_size and heap:
        neg, a, b = heapq.heappop(heap)
        count = pair_count.get((a, b), 0)
        if count != -neg:
            continue
        if count < min_frequency:
            break
        right = vocab[b]
        new = add(vocab[a] + (right[cut:] if right.startswith(prefix) else right))
        changed: set[tuple[int, int]] = set()
        for i in where.pop((a, b)):
            syms, f = symbols[i], freqs[i]
            merged, j = [], 0
            while j < len(syms):
                if j + 1 < len(syms) and syms[j] == a and syms[j + 1] == b:
                    merged.append(new)
                    j += 2
                else:
                    merged.append(syms[j])
                    j += 1
            if len(merged) == len(syms):
                continue
            for pair in zip(syms, syms[1:]):
                pair_count[pair] -= f
                changed.add(pair)
            for pair in zip(merged, merged[1:]):
                pair_count[pair] = pair_count.get(pair, 0) + f
                where.setdefault(pair, set()).add(i)
                changed.add(pair)
            symbols[i] = merged
        for pair in changed:
            c = pair_count[pair]
            if c > 0:
                heapq.heappush(heap, (-c, *pair))
            else:
                del pair_count[pair]
                where.pop(pair, None)
    return vocab


def build_tokenizer(
    texts: Iterable[str],
    *,
    vocab_size: int,
    min_frequency: int,
    min_patients: int | None,
    model_max_length: int = 128,
    groups: Sequence | None = None,
):
    """A BERT-uncased WordPiece tokenizer learnt on `texts`, in memory (a BertTokenizerFast).

    The vocabulary comes from `wordpiece_vocab` (deterministic: the same texts and settings
    give the same vocabulary in every process); ids are canonical: the special tokens, then
    the other tokens sorted. `min_patients`: merges learnt only from the words at least that
    many patients hold (`groups[i]`: the patient of `texts[i]`; `wordpiece_vocab`)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import BertTokenizerFast

    texts = [str(t) for t in texts]
    if not texts:
        raise UserError("train_tokenizer: no training text")
    patients = None
    if min_patients is not None:
        if groups is None or len(groups) != len(texts):
            raise UserError("train_tokenizer: min_patients needs the patient of every training text")
        patients = word_patients(texts, groups)
    learned = wordpiece_vocab(word_counts(texts), vocab_size=int(vocab_size), min_frequency=int(min_frequency),
                              patients=patients, min_patients=min_patients)  # fmt: skip
    rest = sorted(t for t in learned if t not in SPECIAL_TOKENS)
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS + rest)}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", continuing_subword_prefix="##"))
    tok.normalizer = bert_normalizer()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return BertTokenizerFast(
        tokenizer_object=tok,
        do_lower_case=True,
        model_max_length=int(model_max_length),
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
    )


def train_tokenizer(
    texts: Iterable[str],
    out_dir: str | os.PathLike,
    *,
    vocab_size: int,
    min_frequency: int,
    min_patients: int | None,
    model_max_length: int = 128,
    groups: Sequence | None = None,
):
    """Train a BERT-uncased WordPiece tokenizer on `texts` (`build_tokenizer`) and save it as a
    BertTokenizerFast dir: the same texts and settings give byte-identical files in every process."""
    texts = [str(t) for t in texts]
    fast = build_tokenizer(texts, vocab_size=vocab_size, min_frequency=min_frequency, min_patients=min_patients,
                           model_max_length=model_max_length, groups=groups)  # fmt: skip
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))
    kept = "" if min_patients is None else f", merges from words of at least {int(min_patients)} patients"
    log.info("tokenizer: %d texts, vocabulary %d%s -> %s", len(texts), fast.vocab_size, kept, out_dir)
    return fast


def read_training_tables(text_paths: Sequence[str | os.PathLike], groups: bool = False) -> tuple[list[str], list]:
    """The texts of training-text tables (column `text`) in order, and with `groups` each text's
    patient (column `group_id`; the same id in two tables is the same patient, as in the world's
    target and target_named corpora), else an empty list."""
    from mlmia.core.io import read_table, require_columns

    texts: list[str] = []
    patients: list = []
    for p in text_paths:
        df = read_table(p)
        require_columns(df, ["text", "group_id"] if groups else ["text"], str(p))
        texts.extend(df["text"].astype(str).tolist())
        if groups:
            patients.extend(df["group_id"].astype(str).tolist())
    return texts, patients


def tokenizer_from_tables(
    text_paths: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike | None,
    *,
    vocab_size: int,
    min_frequency: int,
    min_patients: int | None,
):
    """Train the shared tokenizer on the union of training-text tables (column `text`; with
    `min_patients`, column `group_id` names each text's patient). `out_dir` None: in memory only."""
    texts, groups = read_training_tables(text_paths, groups=min_patients is not None)
    groups = groups if min_patients is not None else None
    if out_dir is None:
        return build_tokenizer(texts, vocab_size=vocab_size, min_frequency=min_frequency, groups=groups,
                               min_patients=min_patients)  # fmt: skip
    return train_tokenizer(texts, out_dir, vocab_size=vocab_size, min_frequency=min_frequency, groups=groups,
                           min_patients=min_patients)  # fmt: skip


# --------------------------------------------------------------------------- special-token strings in text


def encode_text(tokenizer, texts, *, labels=None, **kwargs):
    """`tokenizer(texts, **kwargs)` reading every special-token string in the text as the characters it is.

    Notes and redacted corpora contain "[MASK]", "<mask>", "[PAD]" or "[SEP]" as text. Read
    as the special tokens, a literal "[MASK]" would be scored as a masked position and a
    literal "[PAD]" fed to the model but left out of the content tokens. Here the
    tokenizer's special tokens are not matched in the text (`split_special_tokens`), and
    a SentencePiece (Unigram) vocabulary that holds the special pieces itself ("[SEP]",
    "<s>") does not produce them from text either (`text_tokenizer`), as SentencePiece
    never does for its control symbols. WordPiece and byte-level BPE pre-tokenizers split
    such strings at their punctuation, so they never match.

    Always returns `special_tokens_mask` (1 for the tokens the tokenizer adds). A content
    token that still has a special token's id (the unknown token's aside) is refused: a
    UserError naming `labels[i]` (default "text i") and the id, never the text.
    """
    texts = list(texts)
    kwargs["return_special_tokens_mask"] = True
    reader = text_tokenizer(tokenizer)
    backend = getattr(reader, "_tokenizer", None)
    before = getattr(backend, "encode_special_tokens", None)
    try:
        enc = reader(texts, split_special_tokens=True, **kwargs)
    finally:  # transformers leaves the flag on its backend; the caller's tokenizer stays as it was
        if isinstance(before, bool) and backend.encode_special_tokens != before:
            backend.encode_special_tokens = before
    forbidden = _special_ids(tokenizer)
    if forbidden.size:
        for i, (ids, special) in enumerate(zip(enc["input_ids"], enc["special_tokens_mask"])):
            content = np.asarray(ids, dtype=np.int64)[np.asarray(special, dtype=bool) == 0]
            hit = content[np.isin(content, forbidden)]
            if hit.size:
                label = labels[i] if labels is not None else f"text {i}"
                raise UserError(
                    f"{label}: the tokenizer {type(tokenizer).__name__} reads part of the text as special token "
                    f"id {int(hit[0])}; it cannot score such text as characters"
                )
    return enc


def _special_ids(tokenizer) -> np.ndarray:
    """ids of the special tokens, the unknown token's aside (text may well be unknown)."""
    ids = {i for i in tokenizer.all_special_ids if isinstance(i, int)}
    with contextlib.suppress(NotImplementedError, AttributeError):
        ids.update(i for i, tok in tokenizer.added_tokens_decoder.items() if getattr(tok, "special", False))
    ids.discard(tokenizer.unk_token_id)
    return np.array(sorted(ids), dtype=np.int64)


def _special_strings(tokenizer) -> set[str]:
    strings = {str(t) for t in tokenizer.all_special_tokens}
    with contextlib.suppress(NotImplementedError, AttributeError):
        strings.update(tok.content for tok in tokenizer.added_tokens_decoder.values() if getattr(tok, "special", False))
    return strings


def text_tokenizer(tokenizer):
    """The tokenizer to read text with: `tokenizer` itself, or for a Unigram (SentencePiece)
    vocabulary holding special pieces, a copy whose model cannot produce them.

    A Unigram model converted from SentencePiece keeps its control symbols ("[CLS]", "[SEP]",
    "<s>", "<pad>", score 0) as ordinary pieces, so a literal "[SEP]" in the text wins the
    Viterbi search as one piece with the special id. In the copy those pieces are renamed
    to strings with an ASCII space, which no pre-tokenized word contains (Metaspace turns
    spaces into "▁"): the ids, scores and every other piece are unchanged. The copy is
    kept on `tokenizer`; the tokenizer itself is never modified.
    """
    key = (len(tokenizer), tuple(sorted(_special_strings(tokenizer))))
    cached = getattr(tokenizer, "_mlmia_text_tokenizer", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    out = tokenizer
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        import copy
        import json

        from tokenizers import Tokenizer

        state = json.loads(backend.to_str())
        model = state.get("model") or {}
        if model.get("type") == "Unigram":
            specials = key[1]
            pieces = {entry[0] for entry in model["vocab"]}
            renamed = 0
            for entry in model["vocab"]:
                if entry[0] in specials:
                    name = f" {entry[0]} "
                    while name in pieces:
                        name += " "
                    pieces.add(name)
                    entry[0] = name
                    renamed += 1
            if renamed:
                out = copy.copy(tokenizer)
                out._tokenizer = Tokenizer.from_str(json.dumps(state))
                log.debug(
                    "tokenizer %s: %d special pieces made unreachable from text", type(tokenizer).__name__, renamed
                )
    with contextlib.suppress(AttributeError, TypeError):
        tokenizer._mlmia_text_tokenizer = (key, out)
    return out


def content_tokens(tokenizer, texts) -> np.ndarray:
    """Content tokens of each text as the scorer counts them (before truncation): no [CLS]/[SEP],
    and special-token strings in the text ("[MASK]", "<pad>") read as the characters they are."""
    texts = list(texts)
    if not texts:
        return np.zeros(0, dtype=np.int64)
    enc = encode_text(tokenizer, texts, add_special_tokens=False, return_attention_mask=False, verbose=False)
    return np.array([len(ids) for ids in enc["input_ids"]], dtype=np.int64)


# --------------------------------------------------------------------------- whole vocabulary entries


class VocabularyReader:
    """Reads text as a model's tokenizer does, to tell whether a value is one entry of its
    vocabulary (the vocabulary check: `mlmia.memorization.vocabulary_check`). `source`: a saved
    tokenizer directory (its `tokenizer.json` is read with the `tokenizers` library alone, without
    transformers or torch), else whatever `mlmia.models.loading.load_tokenizer` loads (a `vocab.txt`,
    an old BERT directory, a hub id in the local cache). The tokenizer's own normalizer and
    pre-tokenizer apply (BERT uncased: lowercase, accents stripped)."""

    def __init__(self, source: str | os.PathLike) -> None:
        path = Path(source)
        saved = path / "tokenizer.json"
        self._slow = None
        if path.is_dir() and saved.is_file():
            from tokenizers import Tokenizer

            self._backend = Tokenizer.from_file(str(saved))
        else:
            from mlmia.models.loading import load_tokenizer

            loaded = load_tokenizer(source)
            self._backend = loaded.backend_tokenizer if getattr(loaded, "is_fast", False) else None
            self._slow = None if self._backend is not None else loaded
        if self._backend is not None:
            # a special token's string in a value is read as its characters, as everywhere text is read
            with contextlib.suppress(AttributeError):
                self._backend.encode_special_tokens = True
            unknown = getattr(self._backend.model, "unk_token", None)
            self.unk_id = self._backend.token_to_id(unknown) if unknown else None
            self.size = int(self._backend.get_vocab_size(with_added_tokens=True))
        else:
            self.unk_id = self._slow.unk_token_id
            self.size = len(self._slow)

    def ids(self, text: str) -> list[int]:
        """The token ids of `text`, without the tokens the tokenizer adds ([CLS], [SEP])."""
        if self._backend is not None:
            return list(self._backend.encode(text, add_special_tokens=False).ids)
        return list(self._slow.convert_tokens_to_ids(self._slow.tokenize(text)))

    def whole(self, value: str) -> bool:
        """Whether `value` is one entry of the vocabulary: read alone, or after a space (where a
        byte-level BPE vocabulary holds a word's in-text form), it is exactly one token, not the
        unknown token."""
        for text in (value, " " + value):
            ids = self.ids(text)
            if len(ids) == 1 and ids[0] != self.unk_id:
                return True
        return False
