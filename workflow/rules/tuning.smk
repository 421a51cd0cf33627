# Tuning: each feature set alone on top of the beam's, then all of them, with every tuner
# (REPLICAS seeds each), on val; each replica's weights applied to test_2016. Feature sets are
# named by scorer (the lists' signatures record them: rerank tune --feature-sets).

def chrf_metric(metric):
    """The +all/chrF-tuned row's metric: TUNE_METRIC with chrF in BLEU's place (bleu -> chrf,
    0.5*bleu-0.5*ter -> 0.5*chrf-0.5*ter); chrf when TUNE_METRIC has no BLEU term."""
    swapped = re.sub(r"\bbleu\b", "chrf", metric)
    return swapped if swapped != metric else "chrf"


#: tuning directory (R/DIR): (tuner, --feature-sets or "" for every column, metric, report row)
TUNING = {}
for _tuner in C["tuners"]:
    for _name, _sets in [("nmt", "beam")] + [(f, f"beam,{FEATURE_SETS[f][0]}") for f in FEATURES] + [("all", "")]:
        _suffix = "" if _tuner == "mira" else f".{_tuner}"
        _row = f"+{_name}" + ("" if _tuner == "mira" else f"/{_tuner.upper()}")
        TUNING[f"{_name}{_suffix}"] = (_tuner, _sets, C["tune_metric"], _row)
if C["chrf_tuning"]:  # +all tuned for chrF instead of BLEU (MIRA): the report shows both rows
    TUNING["all.chrf"] = ("mira", "", chrf_metric(C["tune_metric"]), "+all/chrF-tuned")

for _dir in TUNING:
    for _seed in REPLICA_SEEDS:
        stage(f"tune-{_dir}-seed{_seed}", f"{R}/{_dir}/weights.seed{_seed}.json")
        stage(f"apply-{_dir}-seed{_seed}", f"{R}/{_dir}/test.seed{_seed}.txt")


def tune_args(tuning_dir):
    """rerank tune's options of a row: its tuner, feature sets and metric (BLEU: no option, so
    the commands of a default run stay those of the runs before TUNE_METRIC)."""
    tuner, sets, metric, _ = TUNING[tuning_dir]
    if tuning_dir == "all.chrf":
        return f"--metric '{metric}'" if metric != "chrf" else "--metric chrf"
    return (
        f"--algorithm {tuner}"
        + (f" --feature-sets {sets}" if sets else "")
        + (f" --metric '{metric}'" if metric != "bleu" else "")
    )


rule tune:
    input:
        nbest=f"{N}/val.full.nbest",
    output:
        f"{R}/{{tuning}}/weights.seed{{seed}}.json",
    wildcard_constraints:
        tuning="|".join(re.escape(d) for d in TUNING),
    benchmark:
        f"{OUT}/benchmarks/tune-{{tuning}}-seed{{seed}}.tsv"
    params:
        args=lambda w: tune_args(w.tuning),
        ref=REF["val"],
    shell:
        f"rerank tune {{params.args}} --nbest {{input.nbest}} --ref {{params.ref}} --tokenize {TOKENIZE} "
        "--out {output} --seed {wildcards.seed} --quiet"


rule apply:
    input:
        nbest=f"{N}/test.full.nbest",
        weights=f"{R}/{{tuning}}/weights.seed{{seed}}.json",
    output:
        f"{R}/{{tuning}}/test.seed{{seed}}.txt",
    wildcard_constraints:
        tuning="|".join(re.escape(d) for d in TUNING),
    benchmark:
        f"{OUT}/benchmarks/apply-{{tuning}}-seed{{seed}}.tsv"
    shell:
        "rerank apply --nbest {input.nbest} --weights {input.weights} --out {output}"
