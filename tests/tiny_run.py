"""The overrides of a run that trains in seconds on CPU: the stdlib corpus capped at 400k chars,
tiny-1 (2 blocks, d 32, vocab 2049, context 128), 24 steps of 8 x 64 tokens.

One definition for the suite (tests import it as `conftest.TINY_RUN`) and for
tests/golden/record.py, which runs outside pytest and so imports this module, not conftest
(whose import sets up a test session)."""

TINY_RUN = [
    "size=tiny-1",
    "data.max_chars=400000",
    "data.val_fraction=0.05",
    "train.seq_len=64",
    "train.batch_tokens=512",
    "train.micro_batch_size=8",
    "train.tokens=12288",
    "train.evals=2",
    "train.val_tokens=1024",
    "train.checkpoints=2",
    "train.log_every=4",
    "train.progress=false",
    # W&B off: its offline service costs ~4 CPU-s a run (a tiny run's 13 s -> 9.6 s). The tests
    # of the W&B files ask for wandb.mode=offline themselves (test_train, test_metrics).
    "wandb.mode=disabled",
]
