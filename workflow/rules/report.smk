# Report: the experiment's manifest (what is compared, in the report's row order), the oracle,
# replica 1's scores, the significance report over the replicas, and the trained system.

APPLIED = [f"{R}/{d}/test.seed{s}.txt" for d in TUNING for s in REPLICA_SEEDS]
stage("oracle", f"{R}/test.oracle")
stage("eval", f"{OUT}/results.txt")
stage("report", f"{OUT}/report/table.txt")
stage("system", f"{OUT}/system/system.json")
if C["guard"]:
    stage("val_guard", f"{OUT}/report/val_guard.md")


rule experiment:
    input:
        APPLIED,
        baseline=f"{N}/test.1best",
        nbest=first_list("test"),
    output:
        f"{OUT}/experiment.json",
    params:
        systems=lambda w: " ".join(f"--system '{row}={R}/{d}/test.seed{{replica}}.txt'" for d, (*_, row) in TUNING.items()),
        ref=REF["test"],
    shell:
        f"rerank experiment {OUT} --ref {{params.ref}} --baseline {{input.baseline}} --nbest {{input.nbest}} "
        f"--tokenize {TOKENIZE} --replicas {C['replicas']} {{params.systems}}"


rule oracle:
    input:
        first_list("test"),
    output:
        f"{R}/test.oracle",
    benchmark:
        f"{OUT}/benchmarks/oracle.tsv"
    params:
        ref=REF["test"],
    shell:
        f"rerank oracle --nbest {{input}} --ref {{params.ref}} --tokenize {TOKENIZE} --out {{output}}"


def eval_hyps():
    """rerank eval's systems: the beam, replica 1 of +nmt, +all and +all/MERT (those tuned), the oracle."""
    hyps = {"baseline": f"{N}/test.1best"}
    for name, tuning in (("+nmt", "nmt"), ("+all", "all"), ("+all/MERT", "all.mert")):
        if tuning in TUNING:
            hyps[name] = f"{R}/{tuning}/test.seed1.txt"
    hyps["oracle"] = f"{R}/test.oracle"
    return hyps


rule eval:
    input:
        list(eval_hyps().values()),
    output:
        json=f"{OUT}/results.json",
        txt=f"{OUT}/results.txt",
    benchmark:
        f"{OUT}/benchmarks/eval.tsv"
    params:
        hyps=" ".join(f"--hyp '{name}={path}'" for name, path in eval_hyps().items()),
        ref=REF["test"],
    shell:
        f"rerank eval --ref {{params.ref}} --tokenize {TOKENIZE} {{params.hyps}} --json --out {{output.json}} > /dev/null && "
        f"rerank eval --ref {{params.ref}} --tokenize {TOKENIZE} {{params.hyps}} --out {{output.txt}} > /dev/null"


rule report:
    input:
        f"{OUT}/experiment.json",
        APPLIED,
        [f"{OUT}/report/val_guard.marks.json"] if C["guard"] else [],
    output:
        f"{OUT}/report/table.txt",
        f"{OUT}/report/index.html",
    benchmark:
        f"{OUT}/benchmarks/report.tsv"
    params:
        marks=f"--marks {OUT}/report/val_guard.marks.json" if C["guard"] else "",
        # the sentence analysis (issue 94): sources shown, the training text's word frequencies
        analysis=f"--analysis --source {SPLIT_SOURCE['test']}"
        + (f" --train-source {D}/tok/train.{SRC}" if TRAINED else ""),
    shell:
        f"rerank report {OUT} --metrics bleu,meteor,ter,chrf,length --compare-to +nmt --lang {TGT} --pairs all "
        "{params.marks} {params.analysis}"


# the trained system in one directory (decoder, +all's scorer chain as tuned, the replica of
# the best val score): rerank translate --system OUT/system --input RAW.SRC --out OUT.TGT
rule system:
    input:
        nbest=f"{N}/val.full.nbest",
        weights=[f"{R}/all/weights.seed{s}.json" for s in REPLICA_SEEDS],
    output:
        f"{OUT}/system/system.json",
    benchmark:
        f"{OUT}/benchmarks/system.tsv"
    params:
        weights=lambda w, input: " ".join(f"--weights {p}" for p in input.weights),
    shell:
        f"rerank pack-system --nbest {{input.nbest}}{f' --data-bin {D}/bin' if TRAINED else ''} {{params.weights}} "
        f"--out {OUT}/system"


# The val guard (GUARD=1, issue 46): each row tuned again by cross-fitting on val, tested
# against the val beam and against its base row (+nmt for +mbr) in its tuning metric;
# report/val_guard.md gives the verdicts, and the report marks (§) a row that only fits val.
# Never sees test.
rule val_guard:
    input:
        [f"{R}/{d}/weights.seed{s}.json" for d in TUNING for s in REPLICA_SEEDS],
        experiment=f"{OUT}/experiment.json",
        nbest=f"{N}/val.full.nbest",
        beam=f"{N}/val.1best",
    output:
        md=f"{OUT}/report/val_guard.md",
        json=f"{OUT}/report/val_guard.json",
        verdicts=f"{OUT}/report/val_guard.verdicts.json",
        marks=f"{OUT}/report/val_guard.marks.json",
    params:
        images=f"{C['data']}/task1/image_splits/val.txt",
    benchmark:
        f"{OUT}/benchmarks/val_guard.tsv"
    threads: 2
    shell:
        f"python {os.path.dirname(workflow.basedir)}/scripts/val_guard.py {OUT} --k 5 --images {{params.images}} > /dev/null"
