"""No code from a model directory runs (issue 81, class 1; docs/security.md): a directory whose
``config.json`` or ``tokenizer_config.json`` names code of its own (``auto_map``) is refused in
one line by every loader — ``hf:``, ``hf-lm:``, ``ct2:``, ``rerank generate``, ``bertscore:``
and a COMET checkpoint's encoder — even with a ``y`` piped to transformers' "Do you wish to run
the custom code?" prompt, which, without the refusal, imports the directory's module.  And the
loaders' library exceptions become one line (class 9)."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import needs

pytestmark = needs("hf", "bertscore", "comet")

#: the module a crafted directory names: importing it leaves a marker file (EVIL_MARKER)
EVIL_MODULE = """import os
open(os.environ["EVIL_MARKER"], "w").write("the directory's code ran")
from transformers import PretrainedConfig


class EvilConfig(PretrainedConfig):
    model_type = "evilmodel"
"""


def evil_directory(root, where: str = "config.json") -> str:
    """A model directory of an unknown model type whose ``where`` names its own module."""
    out = root / "evil"
    out.mkdir(exist_ok=True)
    auto_map = {
        name: "evil.EvilConfig"
        for name in ("AutoConfig", "AutoModel", "AutoModelForSeq2SeqLM", "AutoModelForCausalLM", "AutoTokenizer")
    }
    config = {"model_type": "evilmodel", "hidden_size": 8, "num_hidden_layers": 1}
    if where == "config.json":
        config["auto_map"] = auto_map
    else:
        (out / where).write_text(json.dumps({"auto_map": {"AutoTokenizer": ["evil.EvilConfig", None]}}))
    (out / "config.json").write_text(json.dumps(config))
    (out / "model.bin").write_text("")  # what ct2: looks for
    (out / "evil.py").write_text(EVIL_MODULE)
    return str(out)


def run_rerank(args, tmp_path):
    """``rerank ARGS`` in a fresh process with ``y`` on its standard input; (exit status, stderr)."""
    env = {**os.environ, "EVIL_MARKER": str(tmp_path / "marker"), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    run = subprocess.run(
        [sys.executable, "-m", "rerank.cli", *args], input="y\ny\n", capture_output=True, text=True, env=env
    )
    return run.returncode, run.stderr.strip()


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    root = tmp_path_factory.mktemp("texts")
    (root / "src.en").write_text("a man .\ntwo dogs .\n")
    (root / "hyp.de").write_text("ein mann .\nzwei hunde .\n")
    (root / "ref.de").write_text("ein mann .\nzwei hunde .\n")
    (root / "list.nbest").write_text("0 ||| ein mann . ||| NMT= -1 ||| -1\n1 ||| zwei hunde . ||| NMT= -1 ||| -1\n")
    return root


def _commands(evil, texts, tmp_path, comet_dir):
    out = str(tmp_path / "out")
    add = ["features", "add", "--nbest", str(texts / "list.nbest"), "--source", str(texts / "src.en"), "--out", out]
    scored = ["eval", "--hyp", str(texts / "hyp.de"), "--ref", str(texts / "ref.de"), "--metrics"]
    return {
        "hf": add + ["--scorer", f"hf:{evil}"],
        "hf-lm": add + ["--scorer", f"hf-lm:{evil}"],
        "ct2": add + ["--scorer", f"ct2:{evil}"],
        "generate": ["generate", "--model", f"hf:{evil}", "--input", str(texts / "src.en"), "--nbest", "2"]
        + ["--out-nbest", out, "--out-1best", out + ".1best"],
        "bertscore": scored + [f"bertscore:{evil}"],
        "comet encoder": scored + [f"comet:{comet_dir},encoder={evil},source={texts / 'src.en'}"],
    }


@pytest.fixture(scope="module")
def comet_dir(tmp_path_factory):
    from tests.comet_tiny import build_checkpoint

    return build_checkpoint(str(tmp_path_factory.mktemp("comet")), "da")


@pytest.mark.parametrize("where", ["config.json", "tokenizer_config.json"])
@pytest.mark.parametrize("loader", ["hf", "hf-lm", "ct2", "generate", "bertscore", "comet encoder"])
def test_a_directory_naming_its_own_code_is_refused_even_with_a_yes_piped(loader, where, texts, comet_dir, tmp_path):
    evil = evil_directory(tmp_path, where)
    status, err = run_rerank(_commands(evil, texts, tmp_path, comet_dir)[loader], tmp_path)
    assert not (tmp_path / "marker").exists(), f"{loader}: the directory's code ran"
    assert status == 1 and err.count("\n") == 0 and "Traceback" not in err, err
    assert "names code of its own to run (auto_map" in err and os.path.join(evil, where) in err, err
    assert not (tmp_path / "out").exists()


def test_transformers_is_told_never_to_run_a_directory_s_code(tmp_path):
    """Below rerank's own check: once rerank has imported transformers its prompt is off, so a
    library that calls ``from_pretrained`` without a trust setting (bert-score), or a directory
    the check did not see (a hub name in the cache), is refused even with a ``y`` piped in."""
    evil = evil_directory(tmp_path)
    code = (
        "import sys\n"
        "from rerank.features.hf_scorer import import_transformers\n"
        "transformers = import_transformers()\n"
        "try:\n"
        "    transformers.AutoConfig.from_pretrained(sys.argv[1])\n"
        "except ValueError as error:\n"
        "    print('refused:', 'trust_remote_code' in str(error))\n"
    )
    env = {**os.environ, "EVIL_MARKER": str(tmp_path / "marker"), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    run = subprocess.run([sys.executable, "-c", code, evil], input="y\ny\n", capture_output=True, text=True, env=env)
    assert not (tmp_path / "marker").exists(), "the directory's code ran"
    assert run.stdout.strip() == "refused: True", run.stdout + run.stderr


def test_library_errors_while_loading_are_one_line(texts, tmp_path):
    from tests.tiny_models import build_bert

    bert = build_bert(str(tmp_path))
    status, err = run_rerank(
        [
            "eval",
            "--hyp",
            str(texts / "hyp.de"),
            "--ref",
            str(texts / "ref.de"),
            "--metrics",
            f"bertscore:{bert},layers=99",
        ],
        tmp_path,
    )
    assert status == 1 and err.count("\n") == 0 and "Traceback" not in err, err
    assert "layers=99, but the model has 2 layers" in err and bert in err
    broken = tmp_path / "broken"  # a Hugging Face directory whose tokenizer file is damaged
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "marian", "vocab_size": 10, "d_model": 8}))
    (broken / "tokenizer.json").write_text('{"version": "1.0", "model": 7}')
    (broken / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    out = str(tmp_path / "o")
    for spec in (f"hf:{broken}", f"hf-lm:{broken}"):
        status, err = run_rerank(
            ["features", "add", "--nbest", str(texts / "list.nbest"), "--source", str(texts / "src.en")]
            + ["--scorer", spec, "--out", out],
            tmp_path,
        )
        last = err.splitlines()[-1]  # above it, transformers' own warnings on the damaged config
        assert status == 1 and "Traceback" not in err and last.startswith("rerank features: error: "), (spec, err)
        assert str(broken) in last, err
