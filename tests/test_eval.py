"""andrea runs in lm-evaluation-harness: the adapter's scores, the task records, bad input.

One tiny run (24 steps of tiny-1) is trained once for the module; the tasks are small files in
the harness's own YAML format with local JSON-lines data, a multiple-choice and a
rolling-loglikelihood one, so nothing is downloaded.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("lm_eval")

from conftest import TINY_RUN, compose_run  # noqa: E402

from andrea.config.resolve import resolve_run  # noqa: E402
from andrea.eval.load import EvalError, load_run  # noqa: E402
from andrea.run.rundir import RunDir  # noqa: E402
from andrea.train import train  # noqa: E402

MC_DOCS = [  # Python a model trained on the standard library has seen the like of
    {"premise": "def f(x):\n    return", "choices": [" x", " ]])"], "label": 0},
    {"premise": "import", "choices": [" ((", " os"], "label": 1},
    {"premise": "for i in", "choices": [" range(10):", " = = ="], "label": 0},
    {"premise": "class Foo", "choices": [" ,,(", "(object):"], "label": 1},
    {"premise": "if x is", "choices": [" None:", " def def"], "label": 0},
]
ROLL_DOCS = [
    "def hello(name):\n    print('hello', name)\n    return name\n" * 3,
    "class A:\n    pass\n",
]


def write_tasks(folder: Path, cache: Path) -> Path:
    """Two tasks in the harness's YAML format over local JSON-lines files."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mc.jsonl").write_text("".join(json.dumps(d) + "\n" for d in MC_DOCS))
    (folder / "roll.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in ROLL_DOCS))
    common = (
        f"dataset_path: json\ndataset_kwargs:\n  cache_dir: {cache}\n  data_files:\n"
        f"    test: {{file}}\ntest_split: test\n"
    )
    (folder / "mc_local.yaml").write_text(
        "task: mc_local\n"
        + common.format(file=folder / "mc.jsonl")
        + "output_type: multiple_choice\ndoc_to_text: '{{premise}}'\n"
        "doc_to_choice: '{{choices}}'\ndoc_to_target: '{{label}}'\n"
        "metric_list:\n  - metric: acc\n  - metric: acc_norm\n"
    )
    (folder / "roll_local.yaml").write_text(
        "task: roll_local\n"
        + common.format(file=folder / "roll.jsonl")
        + "output_type: loglikelihood_rolling\ndoc_to_text: ''\ndoc_to_target: '{{text}}'\n"
        "metric_list:\n  - metric: word_perplexity\n  - metric: bits_per_byte\n"
    )
    return folder


@pytest.fixture(scope="module")
def env(tmp_path_factory, data_cache):
    """A sweep folder with one finished tiny run, its task folder."""
    root = tmp_path_factory.mktemp("eval")
    run = root / "sweep" / "tiny-1" / "baseline" / "seed0"
    train(resolve_run(compose_run(TINY_RUN)), RunDir(run), {"overrides": []})
    tasks = write_tasks(root / "tasks", root / "hf_cache")
    return {"root": root, "run": run, "sweep": root / "sweep", "tasks": tasks}


def requests(kind: str, args: list[tuple]):
    from lm_eval.api.instance import Instance

    return [Instance(request_type=kind, doc={}, arguments=a, idx=i) for i, a in enumerate(args)]


def direct_logprob(model, ids: list[int], first: int) -> float:
    """sum_{i >= first} log P(ids[i] | ids[:i]), one forward."""
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids[:-1]])), -1)[0]
    return float(sum(logp[i - 1, ids[i]] for i in range(first, len(ids))))


# --------------------------------------------------------------------------------------------
def test_adapter_scores_are_the_models_own(env):
    from andrea.eval.adapter import AndreaLM

    lm = AndreaLM(run_dir=str(env["run"]), device="cpu", batch_size=3)
    run = lm.run
    assert run.final and run.seq_len == 64 and lm.max_length == 64
    pairs = [(d["premise"], " " + c.lstrip()) for d in MC_DOCS for c in d["choices"]] + [
        ("", "import os")
    ]
    got = lm.loglikelihood(requests("loglikelihood", pairs))
    for (ctx, cont), (score, _) in zip(pairs, got):
        if ctx:
            c_ids = lm.tok_encode(ctx)
            ids = lm.tok_encode(ctx + cont)
            first = len(c_ids)
        else:  # an empty context is conditioned on <|endoftext|>, as the harness asks
            ids = [lm.eot_token_id] + lm.tok_encode(cont)
            first = 1
        assert score == pytest.approx(direct_logprob(run.model, ids, first), abs=1e-4)
    # batching (sorted, right-padded) changes nothing
    one = AndreaLM(loaded=run, device="cpu", batch_size=1).loglikelihood(
        requests("loglikelihood", pairs)
    )
    assert [s for s, _ in one] == pytest.approx([s for s, _ in got], abs=1e-5)

    text = ROLL_DOCS[0]
    (rolled,) = lm.loglikelihood_rolling(requests("loglikelihood_rolling", [(text,)]))
    ids = [lm.eot_token_id] + lm.tok_encode(text)
    assert len(ids) <= 64 and rolled == pytest.approx(direct_logprob(run.model, ids, 1), abs=1e-4)
    # a document longer than the window: every token scored once, with less context
    short = AndreaLM(loaded=run, device="cpu", max_length=8)
    (r8,) = short.loglikelihood_rolling(requests("loglikelihood_rolling", [(text,)]))
    assert math.isfinite(r8) and r8 != pytest.approx(rolled, abs=1e-3)

    (gen,) = lm.generate_until(
        requests("generate_until", [("def f(x):", {"until": ["\n\n"], "max_gen_toks": 5})])
    )
    ids = lm.tok_encode("def f(x):")
    for _ in range(5):  # greedy, one token at a time
        with torch.no_grad():
            ids.append(int(run.model(torch.tensor([ids]))[0, -1].argmax()))
    assert gen == lm.tok_decode(ids[len(lm.tok_encode("def f(x):")) :]).split("\n\n")[0]


def evaluate(target, tasks, include_path, *extra) -> int:
    """`python -m andrea.eval <target> --tasks <tasks> --include-path <path> --no-registry
    <extra>`: the local test tasks only."""
    from andrea.eval.__main__ import main

    argv = [str(target), "--tasks", tasks, "--include-path", str(include_path), "--no-registry"]
    return main(argv + list(extra))


def test_evaluate_writes_the_metrics_into_the_run_and_skips_a_repeat(env, capsys):
    from andrea.eval.__main__ import main

    rd = RunDir(env["run"])
    argv = [
        str(env["sweep"]),
        "--tasks",
        "mc_local,roll_local",
        "--include-path",
        str(env["tasks"]),
        "--no-registry",
    ]
    assert main(argv) == 0
    files = sorted(rd.tasks.glob("*.json"))
    assert len(files) == 1
    rec = json.loads(files[0].read_text())
    assert rec["final"] and rec["step"] == rd.read_results()["steps"]
    assert rec["settings"]["tasks"] == ["mc_local", "roll_local"]
    assert rec["settings_hash"] == files[0].stem and rec["harness_version"]
    mc, roll = rec["tasks"]["mc_local"], rec["tasks"]["roll_local"]
    assert mc["n"] == len(MC_DOCS) and mc["chance"] == 0.5
    assert 0 <= mc["acc"] <= 1 and 0 <= mc["acc_norm"] <= 1 and mc["loss"] > 0 and mc["bpb"] > 0
    # our pooled bits per byte of the rolling task is the harness's own
    assert roll["bpb"] == pytest.approx(roll["harness"]["bits_per_byte"], rel=1e-9)
    assert roll["loss"] > 0 and "acc" not in roll

    # the correct continuation's loss, recomputed for the first document
    run = load_run(env["run"])
    from andrea.eval.adapter import AndreaLM

    lm = AndreaLM(loaded=run, device="cpu")
    losses, bpbs = [], []
    for d in MC_DOCS:
        ctx, cont = d["premise"], " " + d["choices"][d["label"]]
        c_ids, ids = lm.tok_encode(ctx), lm.tok_encode(ctx + cont)
        nll = -direct_logprob(run.model, ids, len(c_ids))
        losses.append(nll / (len(ids) - len(c_ids)))
        bpbs.append(nll / (len(cont.encode()) * math.log(2)))
    assert mc["loss"] == pytest.approx(sum(losses) / len(losses), rel=1e-4)
    assert mc["bpb"] == pytest.approx(sum(bpbs) / len(bpbs), rel=1e-4)

    # the same tasks and settings again: skipped; other settings: a file of their own
    capsys.readouterr()
    assert main(argv) == 0
    assert "already evaluated, skipped" in capsys.readouterr().out
    assert main(argv + ["--limit", "2"]) == 0
    assert len(list(rd.tasks.glob("*.json"))) == 2


def test_the_sweep_form_skips_unfinished_runs(env, tmp_path, capsys):
    sweep = tmp_path / "sweep"
    shutil.copytree(env["run"], sweep / "a" / "seed0", ignore=shutil.ignore_patterns("tasks"))
    (sweep / "b" / "seed0" / ".hydra").mkdir(parents=True)  # launched, nothing trained yet
    assert evaluate(sweep, "mc_local", env["tasks"], "--limit", "1") == 0
    out = capsys.readouterr().out
    assert f"skipped {sweep / 'b' / 'seed0'}: not finished" in out
    assert "1 run(s) evaluated" in out
    assert list((sweep / "a" / "seed0" / "tasks").glob("*.json"))


# --------------------------------------------------------------------------------------------
# Bad input: one error line each, exit 2, nothing evaluated
# --------------------------------------------------------------------------------------------
def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    lines = [l for l in err if l.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def test_unknown_task(env, capsys):
    assert evaluate(env["run"], "mc_locl", env["tasks"]) == 2
    line = error_line(capsys)
    assert "unknown task 'mc_locl'" in line and "did you mean mc_local" in line


def test_a_task_whose_documents_do_not_load(env, tmp_path, capsys):
    """As a registry task does on a machine without network: one line, nothing evaluated."""

    folder = tmp_path / "tasks"
    folder.mkdir()
    text = (env["tasks"] / "mc_local.yaml").read_text()
    (folder / "gone.yaml").write_text(
        text.replace("task: mc_local", "task: gone").replace(
            str(env["tasks"] / "mc.jsonl"), str(tmp_path / "missing.jsonl")
        )
    )
    assert evaluate(env["run"], "gone", folder) == 2
    line = error_line(capsys)
    assert "the tasks gone did not load their documents" in line and "FileNotFoundError" in line


def test_a_device_torch_does_not_know_is_one_line_first(tmp_path, capsys):
    """--device tpu ended in torch's RuntimeError traceback; an empty folder as the path shows
    that the device is checked before any run is looked for."""
    from andrea.eval.__main__ import main

    assert main([str(tmp_path), "--tasks", "mc_local", "--device", "tpu"]) == 2
    assert error_line(capsys) == (
        "error: device=tpu is not a device torch knows; use auto, cpu or cuda[:i]"
    )


def test_run_without_checkpoint(env, tmp_path, capsys):

    run = tmp_path / "run"
    shutil.copytree(env["run"], run, ignore=shutil.ignore_patterns("checkpoints", "tasks"))
    assert evaluate(run, "mc_local", env["tasks"]) == 2
    assert "has no checkpoint" in error_line(capsys)
    assert not (run / "tasks").exists()


def test_tokenizer_mismatch(env, tmp_path, capsys):
    from andrea.data.tokenizer import save_tokenizer, train_tokenizer

    other = tmp_path / "other.json"
    save_tokenizer(train_tokenizer(["def f(x): return x\n" * 50, "import os\n" * 50], 270), other)
    assert evaluate(env["run"], "mc_local", env["tasks"], "--tokenizer", str(other)) == 2
    assert "tokenizer mismatch" in error_line(capsys)
    # a run whose own tokenizer.json does not fit its model
    run = tmp_path / "run"
    shutil.copytree(env["run"], run, ignore=shutil.ignore_patterns("tasks"))
    cfg = json.loads((run / "model.json").read_text())
    cfg["model"]["vocab_size"] = 300  # the weights no longer matter: the check comes first
    (run / "model.json").write_text(json.dumps(cfg))
    with pytest.raises(EvalError, match="tokenizer mismatch: .* has 2049 ids but the model"):
        load_run(run)


def test_a_run_from_before_model_json_loads_from_its_hydra_config(env, tmp_path):
    """Runs trained before run directories carried model.json/tokenizer.json (the demo's)."""
    from omegaconf import OmegaConf

    run = tmp_path / "old"
    shutil.copytree(
        env["run"], run, ignore=shutil.ignore_patterns("tasks", "model.json", "tokenizer.json")
    )
    with pytest.raises(EvalError, match="neither model.json nor .hydra/config.yaml"):
        load_run(run)
    (run / ".hydra").mkdir()
    OmegaConf.save(compose_run(TINY_RUN), run / ".hydra" / "config.yaml")
    old, new = load_run(run), load_run(env["run"])
    assert old.cfg == new.cfg and old.seq_len == new.seq_len == 64
    assert old.tokenizer_sha256 == new.tokenizer_sha256
    assert all(
        torch.equal(a, b)
        for a, b in zip(old.model.state_dict().values(), new.model.state_dict().values())
    )


def test_the_harness_command_line_takes_a_run_directory_with_commas(env, tmp_path, monkeypatch):
    """andrea's run names have commas (`seed0,train.lr=0.001`); the harness splits --model_args
    at every comma, which cut the path. `device=` in --model_args beside --device raised
    TypeError (two values for one argument)."""
    from lm_eval._cli import HarnessCLI

    from andrea.eval.adapter import AndreaLM
    from andrea.eval.harness import model_args_as_json

    run = tmp_path / "sweep" / "tiny-1" / "baseline" / "seed0,train.lr=0.001,train.steps=24"
    shutil.copytree(env["run"], run)
    for model_args in (
        [f"run_dir={run},device=cpu"],
        [f"run_dir={run}", "device=cpu"],
        [f'run_dir="{run}",device=cpu'],
        [f"device=cpu,run_dir={run}"],
    ):
        argv = [
            "run",
            "--model",
            "andrea",
            "--model_args",
            *model_args,
            "--device",
            "cpu",
            "--tasks",
            "mc_local",
        ]
        monkeypatch.setattr(sys, "argv", ["lm-eval", *model_args_as_json(argv)])
        args = HarnessCLI().parse_args()
        assert args.model_args == {"run_dir": str(run), "device": "cpu"}, model_args
        # what lm_eval.simple_evaluate passes beside model_args (its default batch size: 1)
        lm = AndreaLM.create_from_arg_obj(
            args.model_args, {"batch_size": 1, "max_batch_size": None, "device": args.device}
        )
        assert lm.run.run_dir.root == run and lm._device.type == "cpu"
    # the harness's other route, a model_args string (lm_eval.simple_evaluate), parses the same
    lm = AndreaLM.create_from_arg_string(f"run_dir={run},batch_size=3", {"device": "cpu"})
    assert lm.run.run_dir.root == run and lm.batch_size == 3
    with pytest.raises(EvalError, match="device=cuda:0 in --model_args and --device cpu disagree"):
        AndreaLM.create_from_arg_obj({"run_dir": str(run), "device": "cuda:0"}, {"device": "cpu"})
    with pytest.raises(EvalError, match="'train.lr' is not one of andrea's .* quote the path"):
        AndreaLM.create_from_arg_obj({"run_dir": str(run).split(",")[0], "train.lr": 0.001})


def test_bad_model_args_on_the_harness_command_line_are_one_error_line(monkeypatch, capsys):
    from andrea.eval import harness

    monkeypatch.setattr(
        sys,
        "argv",
        [
            "andrea.eval.harness",
            "run",
            "--model",
            "andrea",
            "--model_args",
            "runs/x",
            "--tasks",
            "mc_local",
        ],
    )
    with pytest.raises(SystemExit) as stop:
        harness.main()
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1, err
    assert err[0].startswith("error: model_args: expected key=value") and "'runs/x'" in err[0]


def test_the_export_docstring_loads_without_a_question_on_stdin():
    """Without trust_remote_code, an Auto class's from_pretrained(OUT) of an export asks on stdin
    whether to run the folder's code: the docstring passes it to each (True for the model;
    False for the tokenizer, which needs no code: tests/test_eval_export.py)."""
    import andrea.eval.export as export

    lines = [
        line
        for line in export.__doc__.splitlines()
        if "Auto" in line and "from_pretrained(OUT" in line
    ]
    assert len(lines) == 2 and all("trust_remote_code=" in line for line in lines), lines
    assert "AutoTokenizer.from_pretrained(OUT, trust_remote_code=False)" in lines[1]


def test_importing_andrea_does_not_import_lm_eval():
    import subprocess

    code = (
        "import sys, andrea.eval, andrea.eval.load, andrea.eval.export, analysis.inputs.collect; "
        "print('lm_eval' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_shipped_demo_tasks_evaluate_from_any_directory(env, tmp_path, monkeypatch):
    """eval_tasks/ (the README's demo): their documents are found beside the YAML files
    wherever the command runs."""
    from andrea.eval.tasks import evaluate_run

    run = tmp_path / "run"
    shutil.copytree(env["run"], run, ignore=shutil.ignore_patterns("tasks"))
    monkeypatch.chdir(tmp_path)
    tasks = ["code_next_line", "docs_next_words", "code_bpb"]
    rec, new = evaluate_run(run, tasks, [Path(__file__).parent.parent / "eval_tasks"], limit=3)
    assert new and set(rec["tasks"]) == set(tasks)
    assert rec["tasks"]["code_next_line"]["chance"] == 0.25
    assert rec["tasks"]["code_bpb"]["bpb"] > 0
