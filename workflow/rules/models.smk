# Models: prepared data, the baseline and the re-ranking models (right-to-left, channel, a
# second left-to-right model, the German LM, the text-only MLMME model). With --cores 2 two
# trainings run side by side, one CPU thread each (THREADS); a training resumes from its last
# checkpoint (rerank nmt train), so an interrupted rule loses only its current epoch.


rule prepare:
    output:
        f"{D}/prepare.json",
    benchmark:
        stage("prepare", f"{D}/prepare.json")
    shell:
        f"rerank nmt prepare {CORPUS_ARG} --src {SRC} --tgt {TGT}{'' if C['lowercase'] else ' --cased'}"
        f"{'' if C['subword'] == 'subword-nmt' else ' --subword ' + C['subword']} --out {D}"


def train_rule_shell(save_dir, log):
    return (
        f"rerank nmt train {MODELS[save_dir]} --threads {THREADS} 2>&1 | tee -a {log} "
        f"| grep -E '\\| valid \\||done training|Error' || true; "
        f"[ -f {save_dir}/checkpoint_best.pt ] && touch {save_dir}/train.done; "
        f"[ -f {save_dir}/train.done ] || {{ echo 'training did not finish: see {log}' >&2; exit 1; }}"
    )


rule train:
    input:
        f"{D}/prepare.json",
    output:
        f"{M}/train.done",
    benchmark:
        stage("train", f"{M}/train.done")
    threads: 1
    params:
        cmd=lambda w: train_rule_shell(M, f"{OUT}/train.log"),
    shell:
        "{params.cmd}"


rule train_r2l:
    input:
        f"{D}/prepare.json",
    output:
        f"{R2L_DIR}/train.done",
    benchmark:
        stage("train-r2l", f"{R2L_DIR}/train.done")
    threads: 1
    params:
        cmd=lambda w: train_rule_shell(R2L_DIR, f"{R2L_DIR}.log"),
    shell:
        "{params.cmd}"


rule train_channel:
    input:
        f"{D}/prepare.json",
    output:
        f"{CHANNEL_DIR}/train.done",
    benchmark:
        stage("train-channel", f"{CHANNEL_DIR}/train.done")
    threads: 1
    params:
        cmd=lambda w: train_rule_shell(CHANNEL_DIR, f"{CHANNEL_DIR}.log"),
    shell:
        "{params.cmd}"


rule train_l2r2:
    input:
        f"{D}/prepare.json",
    output:
        f"{L2R2_DIR}/train.done",
    benchmark:
        stage("train-l2r2", f"{L2R2_DIR}/train.done")
    threads: 1
    params:
        cmd=lambda w: train_rule_shell(L2R2_DIR, f"{L2R2_DIR}.log"),
    shell:
        "{params.cmd}"


rule train_lm:
    input:
        f"{D}/prepare.json",
    output:
        f"{LM_DIR}/train.done",
    benchmark:
        stage("train-lm", f"{LM_DIR}/train.done")
    threads: 1
    params:
        cmd=lambda w: (
            f"rerank nmt train-lm {LM_ARGS} {DATA_ARG} --threads {THREADS} > {LM_DIR}.log 2>&1 "
            f"|| {{ echo 'LM training failed: see {LM_DIR}.log' >&2; exit 1; }}; touch {LM_DIR}/train.done"
        ),
    shell:
        "{params.cmd}"


# the MLMME model of MLMMEss: text only (beta 0: task-2 descriptions + task-1 pairs of the
# training split; it never sees test_2016); heldout.json is the last file it writes
rule embed_train:
    input:
        f"{D}/prepare.json",
    output:
        f"{E}/heldout.json",
    benchmark:
        stage("embed-train", f"{E}/heldout.json")
    threads: 1
    shell:
        f"rerank embed train {DATA_ARG} --download-dir {D}/download --task1 --beta 0 --epochs {C['embed_epochs']} "
        f"--validate-every 300 --patience 4 --threads {THREADS} --out {E}"


# GENERATOR=fairseq:CHECKPOINT: the user's fairseq transformer converted to CTranslate2 once
# (rerank nmt to-ct2, float32: lossless; generate's compute_type picks int8 on the CPU)
if CONVERTED:

    rule convert_generator:
        output:
            directory(PATHS["generator"]),
        benchmark:
            stage("convert-generator", PATHS["generator"])
        shell:
            f"rerank nmt to-ct2 --checkpoint {CONVERTED[0]} --dict {CONVERTED[1]} --src {SRC} --tgt {TGT} "
            f"--out {PATHS['generator']}"
