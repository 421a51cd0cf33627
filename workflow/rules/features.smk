# Features: one rule per feature set and split, each list carrying every earlier set's columns
# (the sets in FEATURES' order), then N/SPLIT.full.nbest, the list every tuner reads.

#: {feature set: (its name in rerank tune --feature-sets, its scorers, the model it needs)}, from
#: the feature sets' table (workflow/settings/feature_sets.py; TORCH_SETS: the sets scored with
#: torch, whose rules hold TORCH_JOBS cores)
FEATURE_SETS = feature_scorers(C)


def first_list(split):
    """The list the features are added to: the baseline's n-best list, or with R2L_NBEST its
    union with the R2L model's, scored again by the baseline."""
    return f"{N}/{split}.nbest" if C["r2l_nbest"] == 0 else f"{N}/{split}.union.nmt.nbest"


def previous_list(split, name):
    """The list feature set NAME is added to on SPLIT: the one of the set before it in FEATURES."""
    index = FEATURES.index(name)
    return first_list(split) if index == 0 else f"{N}/{split}.{FEATURES[index - 1]}.nbest"


def last_list(split):
    return f"{N}/{split}.{FEATURES[-1]}.nbest" if FEATURES else first_list(split)


for _split in ("val", "test"):
    for _name in FEATURES:
        stage(f"features-{_name}-{_split}", f"{N}/{_split}.{_name}.nbest")


def feature_job(split, name, shard=None):
    """rerank features add of feature set NAME on SPLIT (one shard of SHARDS, or all of it)."""
    scorers = " ".join(f"--scorer {s}" for s in FEATURE_SETS[name][1])
    out = f"{N}/{split}.{name}.nbest"
    # rerank features add's own default (rerank.nbest.BLOCK_HYPOTHESES) is not spelled out
    shards = "" if C["block_hypotheses"] == 50000 else f" --block-hypotheses {C['block_hypotheses']}"
    if shard is not None:
        out = f"{N}/shards/{split}.{name}.{shard}-of-{C['shards']}.nbest"
        shards += f" --num-shards {C['shards']} --shard-id {shard}"
    return (
        f"rerank features add --nbest {previous_list(split, name)} {scorers} --source {SPLIT_SOURCE[split]}"
        f"{shards} --out {out}"
    )


FEATURE_INPUTS = {
    "nbest": lambda w: previous_list(w.split, w.name),
    "model": lambda w: [FEATURE_SETS[w.name][2]] if FEATURE_SETS[w.name][2] else [],
}

if C["shards"] == 1:

    rule features:
        input:
            **FEATURE_INPUTS,
        output:
            f"{N}/{{split}}.{{name}}.nbest",
        wildcard_constraints:
            name="|".join(FEATURES) or "(?!)",
        benchmark:
            f"{OUT}/benchmarks/features-{{name}}-{{split}}.tsv"
        threads: lambda w: TORCH_JOBS if w.name in TORCH_SETS else 1
        params:
            cmd=lambda w: feature_job(w.split, w.name),
        shell:
            "{params.cmd}"

else:  # SHARDS jobs per feature set and split, then rerank merge (it refuses a missing or foreign shard)

    rule features_shard:
        input:
            **FEATURE_INPUTS,
        output:
            f"{N}/shards/{{split}}.{{name}}.{{shard}}-of-{C['shards']}.nbest",
        wildcard_constraints:
            name="|".join(FEATURES) or "(?!)",
            shard=r"\d+",
        benchmark:
            f"{OUT}/benchmarks/features-{{name}}-{{split}}.shard{{shard}}.tsv"
        threads: lambda w: TORCH_JOBS if w.name in TORCH_SETS else 1
        params:
            cmd=lambda w: feature_job(w.split, w.name, int(w.shard)),
        shell:
            "{params.cmd}"

    rule features:
        input:
            lambda w: [f"{N}/shards/{w.split}.{w.name}.{k}-of-{C['shards']}.nbest" for k in range(C["shards"])],
        output:
            f"{N}/{{split}}.{{name}}.nbest",
        wildcard_constraints:
            name="|".join(FEATURES) or "(?!)",
        benchmark:
            f"{OUT}/benchmarks/features-{{name}}-{{split}}.tsv"
        shell:
            "rerank merge {input} --out {output}"


rule full_list:
    input:
        lambda w: last_list(w.split),
    output:
        nbest=f"{N}/{{split}}.full.nbest",
        signature=f"{N}/{{split}}.full.nbest.json",
    shell:
        "cp {input}.json {output.signature} && cp {input} {output.nbest}"
