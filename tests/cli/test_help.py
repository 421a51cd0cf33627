"""First contact: every option of every verb has help text that shows its default, every
verb ends its help with an example, and the top-level help names the formats and scorers."""

import argparse

import pytest

from rerank.cli import build_parser


def _verbs(parser, prefix=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _verbs(sub, prefix + (name,))
            return
    yield prefix, parser


VERBS = list(_verbs(build_parser()))


@pytest.mark.parametrize("verb, parser", VERBS, ids=[" ".join(v) for v, _ in VERBS])
def test_every_option_has_help_with_its_default_and_the_verb_an_example(verb, parser):
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        text = action.help or ""
        if not text or text == argparse.SUPPRESS:
            missing.append(f"{action.option_strings[0]}: no help")
            continue
        has_default = action.default not in (None, False, argparse.SUPPRESS) and not action.required
        if has_default and "default" not in text and "%(default)" not in text:
            missing.append(f"{action.option_strings[0]}: default {action.default!r} not shown")
    assert not missing, f"rerank {' '.join(verb)}: " + "; ".join(missing)
    assert "example:" in (parser.epilog or ""), f"rerank {' '.join(verb)} has no example"


def test_top_level_and_features_add_help_name_formats_and_scorers():
    top = build_parser().format_help()
    for needle in ("id ||| hypothesis ||| name= value", "weights", "fairseq:", "hf:", "ct2:", "mbr:", "nmt:"):
        assert needle in top, needle
    add = dict(VERBS)[("features", "add")].format_help()
    for needle in (
        "nmt:",
        "lm:",
        "fairseq:",
        "hf:",
        "hf-lm:",
        "ct2:",
        "mbr:",
        "e5:",
        "len:",
        "mlmme:",
        "vse:",
        "id ||| hypothesis",
    ):
        assert needle in add, needle


def test_the_scorer_summary_names_every_registered_scorer():
    from rerank.features.scorer import SCORERS, scorer_summaries

    summaries = scorer_summaries()
    assert sorted(summaries) == SCORERS.names()
    assert all(line.startswith(name + ":") for name, line in summaries.items())
