# Features: one rule per feature set and split, each list carrying every earlier set's columns
# (the sets in FEATURES' order), then N/SPLIT.full.nbest, the list every tuner reads.

#: each feature set: (its name in rerank tune --feature-sets, its scorers, the model it needs)
FEATURE_SETS = {
    "mlmme": ("MLMME", [f"mlmme:{E}"], f"{E}/heldout.json"),
    "r2l": ("R2L", [f"nmt:{R2L_DIR}"], f"{R2L_DIR}/train.done"),
    "channel": ("Channel", [f"nmt:{CHANNEL_DIR}"], f"{CHANNEL_DIR}/train.done"),
    "lm": ("LM", [f"lm:{LM_DIR}"], f"{LM_DIR}/train.done"),
    "l2r2": ("L2R2", [f"nmt:{L2R2_DIR}"], f"{L2R2_DIR}/train.done"),
    "mbr": ("MBR", ["mbr:bleu", "mbr:chrf"], None),
    "e5": ("E5", ["e5:"], None),
    "len": ("Len", [f"len:{D}"], f"{D}/prepare.json"),
    "ibm1": ("IBM1", [f"ibm1:{D}"], f"{D}/prepare.json"),
    "qe": ("QE", [f"cometkiwi:{C['qe_checkpoint']}"], None),
}
if not TRAINED:  # a GENERATOR of one's own: length and IBM Model 1 from the raw training pair,
    # MBR's distribution from the generator's column (its name=, else HF or CT2: rerank generate)
    _pair = f"src={RAW['train'][0]},tgt={RAW['train'][1]}"
    _column = model_options(GENERATOR).get("name") or GENERATOR.partition(":")[0].upper()
    FEATURE_SETS.update(
        len=("Len", [f"len:{_pair}"], None),
        ibm1=("IBM1", [f"ibm1:{_pair}"], None),
        mbr=("MBR", [f"mbr:bleu,feature={_column}", f"mbr:chrf,feature={_column}"], None),
    )
for _name in OWN_MODEL_SETS:  # R2L_MODEL / CHANNEL_MODEL: a model of one's own, used as it is
    _spec = own_scorer(C, _name)
    if _spec:
        FEATURE_SETS[_name] = (FEATURE_SETS[_name][0], [_spec], None)
assert list(FEATURE_SETS) == list(feature_sets()), "config/schema.yaml and features.smk disagree"


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
