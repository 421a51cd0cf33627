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


def generate_shell(split):
    """rerank generate of GENERATOR (a model of one's own) on SPLIT's raw source text."""
    return (
        f"rerank generate --model {C['generator']} --input {SPLIT_SOURCE[split]} --nbest {C['nbest']} "
        f"--max-length {C['max_length']} --out-nbest {N}/{split}.nbest --out-1best {N}/{split}.1best"
    )


rule nbest:
    input:
        [f"{M}/train.done"] if TRAINED else [],
    output:
        nbest=f"{N}/{{split}}.nbest",
        best=f"{N}/{{split}}.1best",
    benchmark:
        f"{OUT}/benchmarks/nbest-{{split}}.tsv"
    threads: DECODE_THREADS
    params:
        cmd=lambda w: nbest_shell(M, w.split, w.split, C["nbest"]) if TRAINED else generate_shell(w.split),
    shell:
        "{params.cmd}"


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
        f"--scorer fairseq:{{params.checkpoint}},dict={M},bpe=subword-nmt:{M}/bpe.codes,direction=forward,name=NMT "
        "--beam-feature NMTNorm --beam-set NMT,WordPenalty,NMTNorm --out {output}"
