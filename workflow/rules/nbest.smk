# n-best lists: the baseline's (NBEST hypotheses, beam NBEST) on val and test_2016 (rerank nmt
# nbest of the model trained here, or rerank generate of a GENERATOR of one's own), and with
# R2L_NBEST the right-to-left model's own lists, joined to the baseline's (rerank union) and
# scored again by the baseline (forced decoding) so that the beam's columns cover every hypothesis.
# A decoding uses torch's default threads (every core: the lists stay the bash pipeline's, byte
# for byte), so it holds TORCH_JOBS cores: two decodings side by side on 2 cores spin against
# each other (measured: two 100-best decodings, 4 threads on 2 cores, half the time in the kernel).

FAIRSEQ_SUBSET = {"val": "valid", "test": "test"}
# with R2L_NBEST both models decode side by side on one thread each (OMP_NUM_THREADS=1)
DECODE_THREADS = 1 if THREADS and C["r2l_nbest"] else TORCH_JOBS


def nbest_shell(model_dir, split, name, size):
    """rerank nmt nbest of MODEL_DIR's checkpoint on SPLIT into N/NAME.nbest (and .1best).
    With R2L_NBEST both models decode side by side, one thread each; alone, the baseline's
    decoding keeps torch's threads (as the bash pipeline did: its lists stay byte-identical)."""
    threads = f"OMP_NUM_THREADS={THREADS} " if THREADS and C["r2l_nbest"] else ""
    return (
        f"env {threads}rerank nmt nbest --data-bin {D}/bin --checkpoint {model_dir}/{CHECKPOINT_OF.format(model_dir)} "
        f"--subset {FAIRSEQ_SUBSET[split]} --nbest {size} --out-nbest {N}/{name}.nbest --out-1best {N}/{name}.1best"
    )


for _split in ("val", "test"):
    stage(f"nbest-{_split}", f"{N}/{_split}.nbest")
    stage(f"nbest-r2l-{_split}", f"{N}/{_split}.r2l-beam.nbest")
    stage(f"union-{_split}", f"{N}/{_split}.union.nbest")
    stage(f"rescore-{_split}", f"{N}/{_split}.union.nmt.nbest")


def generate_shell(split, name=None):
    """rerank generate of GENERATOR (a model of one's own) on SPLIT's raw source text into
    N/NAME.nbest (and .1best; NAME: SPLIT)."""
    name = name or split
    return (
        f"rerank generate --model {GENERATOR} --input {SPLIT_SOURCE[split]} --nbest {C['nbest']} "
        f"--max-length {C['max_length']} --out-nbest {N}/{name}.nbest --out-1best {N}/{name}.1best"
    )


def baseline_lists(split, name=None):
    """The baseline's lists of SPLIT into N/NAME.nbest: its decoding, or GENERATOR's."""
    return nbest_shell(M, split, name or split, C["nbest"]) if TRAINED else generate_shell(split, name)


if C["shards"] == 1:

    rule nbest:
        input:
            [f"{M}/train.done"] if TRAINED else GENERATOR_INPUT,
        output:
            nbest=f"{N}/{{split}}.nbest",
            best=f"{N}/{{split}}.1best",
        benchmark:
            f"{OUT}/benchmarks/nbest-{{split}}.tsv"
        threads: DECODE_THREADS
        params:
            cmd=lambda w: baseline_lists(w.split),
        shell:
            "{params.cmd}"

else:  # SHARDS decodings side by side (nmt nbest: shares of fairseq's batches; generate: blocks), joined by rerank merge

    rule nbest_shard:
        input:
            [f"{M}/train.done"] if TRAINED else GENERATOR_INPUT,
        output:
            nbest=f"{N}/shards/{{split}}.{{shard}}-of-{C['shards']}.nbest",
            best=f"{N}/shards/{{split}}.{{shard}}-of-{C['shards']}.1best",
        wildcard_constraints:
            shard=r"\d+",
        benchmark:
            f"{OUT}/benchmarks/nbest-{{split}}.shard{{shard}}.tsv"
        threads: max(1, TORCH_JOBS // C["shards"])
        params:
            cmd=lambda w: (
                f"{baseline_lists(w.split, f'shards/{w.split}.{w.shard}-of-' + str(C['shards']))} "
                f"--num-shards {C['shards']} --shard-id {w.shard}"
            ),
        shell:  # torch's threads: the job's (its cores on a cluster node; JOBS / SHARDS here)
            "env OMP_NUM_THREADS={threads} {params.cmd}"

    rule nbest:
        input:
            nbest=lambda w: [f"{N}/shards/{w.split}.{k}-of-{C['shards']}.nbest" for k in range(C["shards"])],
            best=lambda w: [f"{N}/shards/{w.split}.{k}-of-{C['shards']}.1best" for k in range(C["shards"])],
        output:
            nbest=f"{N}/{{split}}.nbest",
            best=f"{N}/{{split}}.1best",
        benchmark:
            f"{OUT}/benchmarks/nbest-{{split}}.tsv"
        shell:
            "rerank merge {input.nbest} --out {output.nbest} && rerank merge {input.best} --out {output.best}"


rule nbest_r2l:
    input:
        f"{R2L_DIR}/train.done",
    output:
        nbest=f"{N}/{{split}}.r2l-beam.nbest",
        best=f"{N}/{{split}}.r2l-beam.1best",
    benchmark:
        f"{OUT}/benchmarks/nbest-r2l-{{split}}.tsv"
    threads: DECODE_THREADS
    params:
        cmd=lambda w: nbest_shell(R2L_DIR, w.split, f"{w.split}.r2l-beam", C["r2l_nbest"]),
    shell:
        "{params.cmd}"


rule union:
    input:
        beam=f"{N}/{{split}}.nbest",
        r2l=f"{N}/{{split}}.r2l-beam.nbest",
    output:
        f"{N}/{{split}}.union.nbest",
    benchmark:
        f"{OUT}/benchmarks/union-{{split}}.tsv"
    shell:
        "rerank union --nbest {input.beam} --nbest {input.r2l} --out {output}"


rule rescore:
    input:
        nbest=f"{N}/{{split}}.union.nbest",
        model=f"{M}/train.done",
    output:
        f"{N}/{{split}}.union.nmt.nbest",
    benchmark:
        f"{OUT}/benchmarks/rescore-{{split}}.tsv"
    threads: TORCH_JOBS
    params:
        source=lambda w: SPLIT_SOURCE[w.split],
        checkpoint=f"{M}/{CHECKPOINT_OF.format(M)}",
    shell:
        "rerank features add --nbest {input.nbest} --source {params.source} "
        f"--scorer fairseq:{{params.checkpoint}},dict={M},bpe={subword_spec(C, M)},direction=forward,name=NMT "
        "--beam-feature NMTNorm --beam-set NMT,WordPenalty,NMTNorm --out {output}"
