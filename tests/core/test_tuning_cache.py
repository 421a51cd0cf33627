"""Tuning data computed once (rerank/tuning/data.py): the second load of a list reads the
content-addressed cache and gives the same arrays; any changed input, setting or a foreign
entry is never used."""

import json
import os

import numpy as np

from rerank.cli import main
from rerank.metrics import make_objective
from rerank.metrics.bleu import BleuMetric
from rerank.tuning import data as tuning_data
from rerank.tuning.data import cache_key, load_tuning_data
from tests.conftest import write_split


def _entries(cache):
    return sorted(p for p in os.listdir(cache) if p.endswith(".npz")) if os.path.isdir(cache) else []


def _first_load(tmp_path, monkeypatch, segments, seed):
    """(cache directory, list, references, the first load) of a fresh cache and list."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("RERANK_CACHE", str(cache))
    write_split(tmp_path, "val", segments, seed=seed)
    nbest, ref = str(tmp_path / "val.nbest"), str(tmp_path / "val.de")
    return cache, nbest, ref, load_tuning_data(nbest, ref, BleuMetric("none"))


def test_the_second_load_reads_the_cache_and_equals_the_first(tmp_path, monkeypatch):
    cache, nbest, ref, first = _first_load(tmp_path, monkeypatch, 30, 3)
    assert len(_entries(cache)) == 1
    calls = []
    monkeypatch.setattr(tuning_data, "iter_nbest", lambda *a, **k: calls.append(1) or iter(()))
    second = load_tuning_data(nbest, ref, BleuMetric("none"))
    assert calls == []  # the list was not read again
    assert np.array_equal(second[0].offsets, first[0].offsets) and np.array_equal(second[2], first[2])
    assert np.array_equal(second[0].features, first[0].features)
    assert list(second[0].hypotheses) == list(first[0].hypotheses) and second[0].info == first[0].info
    monkeypatch.undo()


def test_any_change_makes_another_entry_and_foreign_or_broken_entries_are_rebuilt(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("RERANK_CACHE", str(cache))
    write_split(tmp_path, "val", 20, seed=4)
    nbest, ref = str(tmp_path / "val.nbest"), str(tmp_path / "val.de")
    base = cache_key(nbest, [ref], BleuMetric("none").signature(), [])
    assert base == cache_key(nbest, [ref], BleuMetric("none").signature(), [])
    assert base != cache_key(nbest, [ref], BleuMetric("13a").signature(), [])  # another setting
    chrf = make_objective("chrf").signature()
    assert base != cache_key(nbest, [ref], chrf, [])  # another metric
    refs = open(ref).read().splitlines()
    old = load_tuning_data(nbest, ref, BleuMetric("none"))
    with open(ref, "w") as out:  # the last reference gains one word
        out.write("\n".join(refs[:-1] + [refs[-1] + " x"]) + "\n")
    changed = load_tuning_data(nbest, ref, BleuMetric("none"))
    assert len(_entries(cache)) == 2  # a new entry; the old one is never used for the new text
    last = slice(int(old[0].offsets[-2]), None)
    assert (changed[2][last, 8] == old[2][last, 8] + 1).all()  # the reference length of its hypotheses
    key = cache_key(nbest, [ref], BleuMetric("none").signature(), [])
    # a foreign file under the key's name (its recorded key differs) and a broken one: rebuilt
    np.savez(cache / f"{key}.npz", key=np.array("someone else"), stats=np.zeros((1, 9)))
    again = load_tuning_data(nbest, ref, BleuMetric("none"))
    assert again[2].shape[0] == len(again[0].hypotheses)
    (cache / f"{key}.npz").write_bytes(b"not a zip")
    assert load_tuning_data(nbest, ref, BleuMetric("none"))[2].shape == again[2].shape
    # RERANK_CACHE=off: nothing written
    monkeypatch.setenv("RERANK_CACHE", "off")
    before = _entries(cache)
    write_split(tmp_path, "other", 10, seed=5)
    load_tuning_data(str(tmp_path / "other.nbest"), str(tmp_path / "other.de"), BleuMetric("none"))
    assert _entries(cache) == before


def test_tune_gives_the_same_weights_with_and_without_the_cache(tmp_path, monkeypatch, capsys):
    write_split(tmp_path, "val", 30, seed=6)
    argv = ["tune", "--nbest", str(tmp_path / "val.nbest"), "--ref", str(tmp_path / "val.de"), "--tokenize", "none"]
    monkeypatch.setenv("RERANK_CACHE", "off")
    assert main(argv + ["--out", str(tmp_path / "a.json"), "--quiet"]) == 0
    monkeypatch.setenv("RERANK_CACHE", str(tmp_path / "cache"))
    for name in ("b", "c"):  # the first fills the cache, the second reads it
        assert main(argv + ["--out", str(tmp_path / f"{name}.json"), "--quiet"]) == 0
    weights = [json.load(open(tmp_path / f"{n}.json"))["weights"] for n in "abc"]
    assert weights[0] == weights[1] == weights[2]


def test_a_crafted_or_truncated_entry_under_the_right_key_is_rebuilt(tmp_path, monkeypatch):
    cache, nbest, ref, first = _first_load(tmp_path, monkeypatch, 20, 5)
    (entry,) = _entries(cache)
    path = cache / entry
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files}
    crafted = {
        "other statistics": {"stats": arrays["stats"] * 2},  # the right key, other numbers
        "NaN features": {"features": np.full_like(arrays["features"], np.nan)},
        "fewer rows": {k: arrays[k][:-1] for k in ("features", "totals", "stats")},
        "offsets past the end": {"offsets": arrays["offsets"] + 1},
        "a string where numbers go": {"stats": np.array(["x"] * len(arrays["stats"]))},
    }
    for what, change in crafted.items():
        np.savez(path, **{**arrays, **change})  # the recorded key and checksum of the real entry
        again = load_tuning_data(nbest, ref, BleuMetric("none"))
        assert np.array_equal(again[2], first[2]), what
        assert np.array_equal(again[0].features, first[0].features), what
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])  # truncated
    again = load_tuning_data(nbest, ref, BleuMetric("none"))
    assert np.array_equal(again[2], first[2])
    with np.load(path) as data:  # the rebuilt entry is whole again
        assert str(data["check"]) == tuning_data._entry_digest({name: data[name] for name in data.files})


def test_an_entry_with_a_valid_checksum_but_nan_features_is_rebuilt(tmp_path, monkeypatch):
    """Issue 92, class 11: an entry re-signed with its checksum over NaN features was used (60
    epochs on NaN, no word): entries must hold finite features and totals, as the reader does."""
    cache, nbest, ref, first = _first_load(tmp_path, monkeypatch, 20, 5)
    (entry,) = _entries(cache)
    path = cache / entry
    with np.load(path) as data:
        arrays = {name: data[name] for name in data.files if name not in ("key", "check")}
        key = str(data["key"])
    for column in ("features", "totals"):
        poisoned = {
            **arrays,
            column: np.where(np.arange(arrays[column].size).reshape(arrays[column].shape) == 3, np.nan, arrays[column]),
        }
        np.savez(path, key=np.array(key), check=np.array(tuning_data._entry_digest(poisoned)), **poisoned)
        again = load_tuning_data(nbest, ref, BleuMetric("none"))
        assert np.isfinite(again[0].features).all(), column
        assert np.array_equal(again[0].features, first[0].features), column


def test_the_api_refuses_an_empty_list_in_words():
    import pytest

    import rerank
    from rerank.errors import InputError
    from rerank.nbest import NBestList

    empty = NBestList(np.array([0]), [], np.zeros((0, 1)), ["F"])
    for settings in ({"init": "zeros"}, {"beam_feature": "F"}, {"algorithm": "mert", "init": "zeros"}):
        with pytest.raises(InputError, match="the n-best list is empty"):
            rerank.tune(empty, [], **settings)


def test_the_cache_keeps_to_its_size_cap_dropping_the_entries_used_longest_ago(tmp_path, monkeypatch):
    """Issue 93, item 13: the cache grew without bound (549 MB seen); RERANK_CACHE_MAX caps it,
    least recently used first (a load touches its entry)."""
    import pytest

    from rerank.errors import InputError

    cache = tmp_path / "cache"
    monkeypatch.setenv("RERANK_CACHE", str(cache))
    paths = []
    for k, seed in enumerate((1, 2, 3)):
        write_split(tmp_path / f"d{k}", "val", 10, seed=seed)
        paths.append((str(tmp_path / f"d{k}" / "val.nbest"), str(tmp_path / f"d{k}" / "val.de")))
    load_tuning_data(*paths[0], BleuMetric("none"))
    first = _entries(cache)[0]
    size = os.path.getsize(cache / first)
    monkeypatch.setenv("RERANK_CACHE_MAX", str(int(size * 2.5)))  # room for two entries
    os.utime(cache / first, (1, 1))  # used long ago
    load_tuning_data(*paths[1], BleuMetric("none"))
    second = [e for e in _entries(cache) if e != first][0]
    os.utime(cache / second, (2, 2))  # used after the first (explicit times: the clock's ticks are coarse)
    load_tuning_data(*paths[0], BleuMetric("none"))  # used again: now the most recent
    assert os.path.getmtime(cache / first) > 2  # the load touched it
    load_tuning_data(*paths[2], BleuMetric("none"))  # a third entry: one must go
    assert first in _entries(cache) and second not in _entries(cache) and len(_entries(cache)) == 2
    for value in ("lots", "-1", "1e30G"):
        monkeypatch.setenv("RERANK_CACHE_MAX", value)
        with pytest.raises(InputError, match="RERANK_CACHE_MAX"):
            tuning_data.cache_limit()
    monkeypatch.setenv("RERANK_CACHE_MAX", "1K")
    assert tuning_data.cache_limit() == 1024
