"""``ibm1:`` and ``len:`` trained on text that does not match the list (issue 78): raw cased
training files against tokenised lowercased lists gave tables whose words the list mostly
never uses, silently.  Now the first list scored is checked against the training text's
words, and one warning line gives the numbers; text that matches gives none."""

import pytest

from rerank.cli import main
from tests.conftest import write_split

RAW = ["A Man, riding a Bike.", "Two DOGS play!", "Eine Frau; in Rot."]


@pytest.fixture
def lists(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    nbest, refs = write_split(tmp_path, "val", 6, seed=1)
    (tmp_path / "val.en").write_text("".join(f"source {k}\n" for k in range(6)))
    # raw, cased, untokenised training text: none of the list's lowercased words as they are
    (tmp_path / "raw.en").write_text("".join(f"{line}\n" for line in RAW * 20))
    (tmp_path / "raw.de").write_text("".join(f"{line.upper()} {line}\n" for line in RAW * 20))
    # text as the list's: its own references
    (tmp_path / "tok.en").write_text("".join(f"source {k}\n" for k in range(6)))
    (tmp_path / "tok.de").write_text("".join(f"{r}\n" for r in refs))
    return tmp_path


@pytest.mark.parametrize("scorer", ["ibm1", "len"])
def test_training_text_unlike_the_list_is_one_warning_with_the_numbers(lists, capsys, scorer):
    add = ["features", "add", "--nbest", "val.nbest", "--source", "val.en"]
    assert main(add + ["--scorer", f"{scorer}:src=raw.en,tgt=raw.de", "--out", "raw.nbest"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"rerank: warning: {scorer}:src=raw.en,tgt=raw.de: 100% of the list's words (")
    assert "are not in the training text raw.de" in warnings[0] and "tokenise and case it as the list is" in warnings[0]
    assert main(add + ["--scorer", f"{scorer}:src=tok.en,tgt=tok.de", "--out", "tok.nbest"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_features_add_names_every_part_of_its_time(lists, capsys):
    """The summary adds up: building (IBM Model 1's training), reading, scoring, writing and
    the rest, each named, and the signature records them (issue 78: 173 s of scorers in a
    558 s total, the rest unnamed)."""
    import json
    import re

    add = ["features", "add", "--nbest", "val.nbest", "--source", "val.en", "--scorer", "ibm1:src=tok.en,tgt=tok.de"]
    assert main(add + ["--scorer", "len:src=tok.en,tgt=tok.de", "--out", "full.nbest"]) == 0
    err = capsys.readouterr().err
    assert re.search(
        r"ibm1:src=tok\.en,tgt=tok\.de: built \(models loaded, tables trained\) in \d+\.\d s; 48 hypotheses scored in",
        err,
    )
    total = re.search(
        r"48 hypotheses in (\S+) s: building the scorers (\S+) s, reading the list (\S+) s, scoring (\S+) s \(\d+/s\), "
        r"writing (\S+) s, the rest \(inputs, checks, signature\) (\S+) s; features: NMT IBM1Norm IBM1InvNorm LenRatio LenDev",
        err,
    )
    assert total, err
    seconds, *parts = (float(x) for x in total.groups())
    assert abs(sum(parts) - seconds) <= 0.2 + 1e-9  # printed to 0.1 s each
    record = json.loads((lists / "full.nbest.json").read_text())
    assert set(record["phase_seconds"]) == {"reading", "writing", "building", "scoring"}
    assert sum(record["phase_seconds"].values()) <= record["seconds"] + 1e-3
    assert set(record["build_seconds"]) == {"ibm1:src=tok.en,tgt=tok.de", "len:src=tok.en,tgt=tok.de"}
