"""Shared fixtures. Tiny random masked language models built here (nothing is downloaded)."""

from __future__ import annotations

import pytest

TINY_MAX_LEN = 40  # positions (special tokens included) of the tiny models: long texts get truncated

TINY_WORDS = """
patient admitted with chest pain and shortness of breath history hypertension diabetes
denies fever cough nausea vomiting blood pressure heart rate normal sinus rhythm mg daily
oral tablet aspirin metoprolol insulin given discharged home follow up clinic in two weeks
the a of to was is on for no left right lung kidney liver acute chronic failure
""".split()
TINY_PIECES = list("abcdefghijklmnopqrstuvwxyz0123456789.,:;-/()%")


def tiny_vocab() -> list[str]:
    """A small WordPiece vocabulary: specials, words, characters and ## continuations."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    for tok in TINY_WORDS + TINY_PIECES + ["##" + c for c in TINY_PIECES if c.isalnum()]:
        if tok not in vocab:
            vocab.append(tok)
    return vocab


def build_tiny_tokenizer(directory):
    from transformers import BertTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    vocab = {tok: i for i, tok in enumerate(tiny_vocab())}
    tokenizer = BertTokenizerFast(vocab=vocab, do_lower_case=True, model_max_length=TINY_MAX_LEN)
    assert len(tokenizer) == len(vocab), "tokenizer did not take the vocabulary"
    return tokenizer


def build_tiny_bert(seed: int, vocab_size: int):
    import torch
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=TINY_MAX_LEN,
        initializer_range=0.3,  # large weights: logits far from uniform, so errors show
        pad_token_id=0,
    )
    return BertForMaskedLM(config).eval()


def _save_tiny_bert(directory, seed: int):
    tokenizer = build_tiny_tokenizer(directory)
    model = build_tiny_bert(seed, len(tokenizer))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    """A saved random 2-layer, 32-wide BertForMaskedLM with its tokenizer (max length 40)."""
    return _save_tiny_bert(tmp_path_factory.mktemp("tiny_bert_a"), seed=0)


@pytest.fixture(scope="session")
def tiny_bert_dir_b(tmp_path_factory):
    """A second tiny BERT, same tokenizer, different weights (a 'reference' model)."""
    return _save_tiny_bert(tmp_path_factory.mktemp("tiny_bert_b"), seed=1)


@pytest.fixture(scope="session")
def tiny_roberta(tmp_path_factory):
    """(model, tokenizer): a random RobertaForMaskedLM (head `lm_head`, offset positions)."""
    import torch
    from transformers import RobertaConfig, RobertaForMaskedLM

    tokenizer = build_tiny_tokenizer(tmp_path_factory.mktemp("tiny_roberta"))
    torch.manual_seed(2)
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=TINY_MAX_LEN + 2,
        initializer_range=0.3,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
    )
    return RobertaForMaskedLM(config).eval(), tokenizer


@pytest.fixture(scope="session")
def tiny_distilbert(tmp_path_factory):
    """(model, tokenizer): a random DistilBertForMaskedLM (its own head names: vocab_transform ... vocab_projector)."""
    import torch
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    tokenizer = build_tiny_tokenizer(tmp_path_factory.mktemp("tiny_distilbert"))
    torch.manual_seed(3)
    config = DistilBertConfig(
        vocab_size=len(tokenizer),
        dim=32,
        n_layers=2,
        n_heads=4,
        hidden_dim=64,
        max_position_embeddings=TINY_MAX_LEN,
        initializer_range=0.3,
        pad_token_id=0,
    )
    return DistilBertForMaskedLM(config).eval(), tokenizer


@pytest.fixture(scope="session")
def ci_run(tmp_path_factory):
    """The embedded world's whole DAG on config/ci.yaml, run once per session in a temp copy."""
    from workflow_helpers import run_config

    return run_config(tmp_path_factory.mktemp("embedded"), "ci.yaml")


# Fixtures that run the workflow's jobs for real: a test that uses one is a `workflow` test
WORKFLOW_FIXTURES = {"ci_run", "default_run", "headline_run", "audit_run"}

#: Runs started in the background at collection (`pytest_collection_finish`) when a collected test
#: needs them, by fixture: (config, named targets, guard timeout in seconds). They then fill the
#: cores that the rest of the suite leaves idle (single-threaded unit tests, SLURM's status
#: polling) instead of running alone when their tests' turn comes. The full default run
#: (about an hour of 2 cores) is `make test-default`'s; the headline findings' models and
#: scores (`snakemake headline`, a few minutes) are `make test`'s.
BACKGROUND_RUNS = {
    "default_run": ("config.yaml", (), 5400),
    "headline_run": ("config.yaml", ("headline",), 2400),
}
BACKGROUND = pytest.StashKey[dict]()


def pytest_collection_modifyitems(items):
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if WORKFLOW_FIXTURES & fixtures:
            item.add_marker(pytest.mark.workflow)
        if "default_run" in fixtures:  # `make test` leaves these out (pyproject's addopts)
            item.add_marker(pytest.mark.default_world)
    # The tests that read a background run go last, the full default run's after the rest: the
    # runs overlap the whole suite, instead of the suite stopping part of the way in to wait.
    # Otherwise the order is the files'.
    items.sort(
        key=lambda item: (
            "default_run" in getattr(item, "fixturenames", ()),
            "headline_run" in getattr(item, "fixturenames", ()),
        )
    )


def pytest_collection_finish(session):
    """Start each background run that a collected test needs (`BACKGROUND_RUNS`)."""
    if session.config.option.collectonly:
        return
    from workflow_helpers import start_config

    started = {}
    for fixture, (config, targets, _) in BACKGROUND_RUNS.items():
        if any(fixture in getattr(item, "fixturenames", ()) for item in session.items):
            workdir = session.config._tmp_path_factory.mktemp(fixture.removesuffix("_run"))
            started[fixture] = (workdir, *start_config(workdir, config, *targets))
    session.config.stash[BACKGROUND] = started


def pytest_sessionfinish(session):
    """No background run outlives the session (one stopped early by -x, Ctrl-C or a failure)."""
    import os
    import signal

    for _, process, _ in session.config.stash.get(BACKGROUND, {}).values():
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def background_run(request, tmp_path_factory, fixture: str):
    """The background run of `fixture`, waited for; run here when it was not started at collection."""
    from workflow_helpers import run_config, wait_snakemake

    config, targets, timeout = BACKGROUND_RUNS[fixture]
    started = request.config.stash.get(BACKGROUND, {}).get(fixture)
    if started is None:
        return run_config(tmp_path_factory.mktemp(fixture.removesuffix("_run")), config, *targets, timeout=timeout)
    workdir, process, log = started
    wait_snakemake(process, timeout=timeout, log=log)
    return workdir


@pytest.fixture(scope="session")
def default_run(request, tmp_path_factory):
    """The whole default run (config/config.yaml) in a temp copy, as long as `make run`: for the
    tests marked default_world (`make test-default`)."""
    return background_run(request, tmp_path_factory, "default_run")


@pytest.fixture(scope="session")
def headline_run(request, tmp_path_factory):
    """`snakemake headline` on config/config.yaml in a temp copy: the default world's Base, Base-b
    and references, the headline findings' experiments (tests/test_headline.py, in `make test`)."""
    return background_run(request, tmp_path_factory, "headline_run")


@pytest.fixture
def one_torch_thread():
    """Tiny models run fastest on one thread, and a busy 2-core machine makes 2 threads crawl."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
