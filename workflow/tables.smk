# The paper's Tables 3 and 4 (Calixto & Liu 2017) as Snakemake rules: NMT variants weak /
# regular / optimised x 20- and 50-best lists x re-rankers +VSE (s_i) and +MLMME beta (s_s and
# s_i), with the baseline, +nmt, +all (the main job's features, where its lists are shared) and
# oracle rows, the paper's value beside ours in every cell.
#
#   bash scripts/run_tables.sh                          # runs the GRU main job first, then these rules
#   snakemake -n -s workflow/tables.smk --config k=10   # what would run (the main job's files must exist)
#
# Settings: config/tables.schema.yaml (types, help, defaults; --help and the docs' table are
# generated from it). Protocols (docs/usage/paper-tables.md):
# * crossfit - image features exist here only for the 1,000 test_2016 images. test_2016 is split
#   by image into K folds (rerank folds); fold k's embedding models are trained without fold k's
#   images and score fold k's hypotheses (s_s, s_i); MIRA is tuned on the other folds' lists and
#   applied to fold k (rerank crossfit). A second view ("val") tunes on val as the paper did, with
#   s_s only: fold k's model scores val and fold k's test hypotheses. Views with s_i also tune each
#   +MLMME row without it ("(s_s only)") and write a second report with ‡ against +nmt.
# * paper - the paper's protocol, for users with image features of every split (IMAGES,
#   IMAGE_NAMES): one model per row, s_s and s_i on val and test, MIRA tuned on val.
# Every rule keeps the libraries' default CPU threads (as the bash script did); the trainings use
# one thread each with JOBS >= 2. OUT/benchmarks/STAGE.tsv holds each rule's benchmark and
# OUT/timings.tsv their wall seconds.
import os
import shlex
import sys

sys.path.insert(0, workflow.basedir)
from settings import SettingsError, tables_complete  # noqa: E402  (workflow/settings/)

try:
    config.update(tables_complete(config))
except SettingsError as error:
    raise WorkflowError(f"config: {error}") from None

C = config
shell.prefix(
    "set -euo pipefail; unset OMP_NUM_THREADS MKL_NUM_THREADS OPENBLAS_NUM_THREADS GOTO_NUM_THREADS "
    "VECLIB_MAXIMUM_THREADS NUMEXPR_NUM_THREADS; "
)
os.environ.setdefault("PYTHONUNBUFFERED", "1")
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

OUT, MAIN, DATA = C["out"], C["out_main"], C["data"]
D, E, F, N = f"{MAIN}/data", f"{OUT}/embed", f"{OUT}/folds.tsv", f"{OUT}/lists"
SRC = {"val": f"{D}/tok/val.en", "test": f"{D}/tok/test_2016_flickr.en"}
REF = {"val": f"{D}/tok/val.de", "test": f"{D}/tok/test_2016_flickr.de"}
IMG = {"val": f"{DATA}/task1/image_splits/val.txt", "test": f"{DATA}/task1/image_splits/test_2016_flickr.txt"}
TEXT_MODEL = f"{MAIN}/embed"
THREADS = 1 if C["jobs"] >= 2 else 0
CROSSFIT = C["protocol"] == "crossfit"
FOLDS = [str(k) for k in range(C["k"])] if CROSSFIT else ["all"]
VIEWS = ["crossfit", "val"] if CROSSFIT else ["paper"]
SEEDS = range(1, C["replicas"] + 1)
BETAS = [str(b) for b in C["betas"]]
EMBEDDINGS = ["vse"] + [f"mlmme-b{b}" for b in BETAS]
#: {stage name: output path}: OUT/timings.tsv's rows
STAGES = {}


def fixed(command):
    """A rule's command as a parameter that Snakemake does not format (its braces, e.g.
    rerank's {fold} and {replica}, are kept); bound now, not when the job runs (rules are
    defined in loops)."""
    return lambda wildcards, _command=command: _command


def bench(name, output):
    STAGES[name] = output
    return f"{OUT}/benchmarks/{name}.tsv"


def logged(log, command):
    """COMMAND with its output in LOG; on failure the log's end is shown."""
    return f"{command} > {log} 2>&1 || {{ echo 'failed: see {log}' >&2; tail -n 5 {log} >&2; exit 1; }}"


def model_dir(variant):
    return f"{MAIN}/model" if variant == "regular" else f"{OUT}/{variant}/model"


def shared(variant, size):
    """Whether the cell's lists are the main job's own (every feature of the main job)."""
    return variant == "regular" and size == C["main_nbest"]


def list_in(variant, split, size):
    """The n-best list a cell starts from."""
    return f"{MAIN}/nbest/{split}.full.nbest" if shared(variant, size) else f"{OUT}/{variant}/{split}.{size}.nbest"


def baseline_of(variant, size):
    return f"{MAIN}/nbest/test.1best" if shared(variant, size) else f"{OUT}/{variant}/test.{size}.1best"


def embed_dir(name, fold):
    return f"{E}/{name}/fold{fold}" if CROSSFIT else f"{E}/{name}"


# the main job's files this grid starts from (run_tables.sh runs the main job first; MAIN_JOB=0)
DECODED = [(v, n) for v in C["variants"] for n in C["sizes"] if not shared(v, n)]  # lists decoded here
NEEDED = [f"{TEXT_MODEL}/heldout.json", C["paper_table"], IMG["val"]] + ([f"{D}/bin"] if DECODED else [])
NEEDED += [C["feats"], C["feat_split"]] if CROSSFIT else [C["images"], C["image_names"]]
NEEDED += [list_in(v, s, n) for v in C["variants"] for n in C["sizes"] for s in ("val", "test") if shared(v, n)]
NEEDED += [f"{MAIN}/model/train.done"] if any(v == "regular" for v, _ in DECODED) else []
for path in NEEDED:
    if not os.path.exists(path):
        raise WorkflowError(
            f"run_tables.sh: missing {path} (the main job's files: run SYSTEM=gru scripts/run_pipeline.sh "
            f"with OUT={MAIN} to the end)"
        )

# --- NMT variants and their lists ------------------------------------------------------
for v in C["variants"]:
    if v != "regular":  # as the main job trains its baseline

        rule:
            name:
                f"train_{v}"
            input:
                f"{D}/bin",
            output:
                f"{model_dir(v)}/train.done",
            benchmark:
                bench(f"train-{v}", f"{model_dir(v)}/train.done")
            threads: 1
            params:
                cmd=fixed(
                    f"mkdir -p {model_dir(v)}; rerank nmt train --data-bin {D}/bin --save-dir {model_dir(v)} "
                    f"--preset {C['preset']} --variant {v} --patience {C['patience']} --threads {THREADS} "
                    f"--max-epoch {C['max_epoch']} --seed {C['seed']} >> {OUT}/{v}/train.log 2>&1 "
                    f"|| {{ echo 'training {v} failed: see {OUT}/{v}/train.log' >&2; exit 1; }}; "
                    f"touch {model_dir(v)}/train.done"
                ),
            shell:
                "{params.cmd}"

    for n in C["sizes"]:
        if shared(v, n):
            continue
        for split, subset in (("val", "valid"), ("test", "test")):

            rule:
                name:
                    f"nbest_{v}_{split}_{n}"
                input:
                    f"{model_dir(v)}/train.done",
                output:
                    f"{OUT}/{v}/{split}.{n}.nbest",
                    f"{OUT}/{v}/{split}.{n}.1best",
                benchmark:
                    bench(f"nbest-{v}-{split}-{n}", f"{OUT}/{v}/{split}.{n}.nbest")
                params:
                    cmd=fixed(
                        logged(
                            f"{OUT}/{v}/{split}.{n}.log",
                            f"rerank nmt nbest --data-bin {D}/bin --checkpoint {model_dir(v)}/checkpoint_best.pt "
                            f"--subset {subset} --nbest {n} --out-nbest {OUT}/{v}/{split}.{n}.nbest "
                            f"--out-1best {OUT}/{v}/{split}.{n}.1best",
                        )
                    ),
                shell:
                    "{params.cmd}"


# --- embedding models --------------------------------------------------------------------
if CROSSFIT:

    rule folds:
        input:
            IMG["test"],
        output:
            F,
        benchmark:
            bench("folds", F)
        shell:
            f"rerank folds --segment-images {{input}} --k {C['k']} --seed {C['fold_seed']} --out {{output}}"


def embed_args(fold):
    """The image data of one model: a cross-fitted fold, or every split's features."""
    if CROSSFIT:
        return (
            f"--image-features {C['feats']} --image-split {C['feat_split']} --folds {F} --fold {fold} "
            f"--valid-images {C['valid_images']}"
        )
    return f"--image-features {C['images']} --image-split {C['image_names']} --image-task2-split none"


for fold in FOLDS:
    for name in EMBEDDINGS:
        directory = embed_dir(name, fold)
        if name == "vse":  # German VSE from scratch
            own, stage, start = f"--langs de --beta 1 --epochs {C['vse_epochs']}", f"embed-vse-f{fold}", []
        else:  # MLMME beta, from the main job's text-only model
            beta = name[len("mlmme-b") :]
            own = f"--task1 --beta {beta} --init-model {TEXT_MODEL} --epochs 60 --max-steps {C['embed_steps']}"
            stage, start = f"embed-b{beta}-f{fold}", [f"{TEXT_MODEL}/heldout.json"]

        rule:
            name:
                f"embed_{name}_f{fold}".replace(".", "_")
            input:
                [F] if CROSSFIT else [],
                start,
            output:
                f"{directory}/heldout.json",
            benchmark:
                bench(stage, f"{directory}/heldout.json")
            threads: 1
            params:
                cmd=fixed(
                    f"mkdir -p {directory}; "
                    + logged(
                        f"{directory}.log",
                        f"rerank embed train --data {DATA} {embed_args(fold)} --validate-every 100 --patience 4 "
                        f"--threads {THREADS} {own} --out {directory}",
                    )
                ),
            shell:
                "{params.cmd}"

        if CROSSFIT:  # ISR of each fold's models on the fold's own (held-out) images

            rule:
                name:
                    f"isr_{name}_f{fold}".replace(".", "_")
                input:
                    f"{directory}/heldout.json",
                output:
                    f"{directory}/isr.de.json",
                benchmark:
                    bench(f"isr-{name}-f{fold}", f"{directory}/isr.de.json")
                params:
                    cmd=fixed(
                        f"rerank embed isr --model {directory} --data {DATA} --image-features {C['feats']} "
                        f"--image-split {C['feat_split']} --lang de --json > {directory}/isr.de.json.tmp "
                        f"&& mv {directory}/isr.de.json.tmp {directory}/isr.de.json"
                    ),
                shell:
                    "{params.cmd}"


# --- features ----------------------------------------------------------------------------
def scorers(fold, with_vse):
    """--scorer arguments of every embedding model (fold "{fold}": rerank's per-fold placeholder)."""
    args = [f"--scorer vse:{embed_dir('vse', fold)}"] if with_vse else []
    return " ".join(args + [f"--scorer mlmme:{embed_dir(f'mlmme-b{b}', fold)},name=MLMMEb{b}" for b in BETAS])


EMBEDDED = [f"{embed_dir(name, fold)}/heldout.json" for fold in FOLDS for name in EMBEDDINGS]


def add_rule(stage, out, inputs, args):
    """rerank features add ARGS --out OUT, logged in OUT.log."""

    rule:
        name:
            "features_" + stage.replace("-", "_").replace(".", "_")
        input:
            inputs,
        output:
            out,
        benchmark:
            bench(stage, out)
        params:
            cmd=fixed(logged(f"{out}.log", f"rerank features add {args} --out {out}")),
        shell:
            "{params.cmd}"


for v in C["variants"]:
    for n in C["sizes"]:
        c = f"{v}.{n}"
        if CROSSFIT:
            test_in = list_in(v, "test", n)
            add_rule(
                f"features-{c}-test-si",
                f"{N}/test.{c}.si.nbest",
                [test_in, F] + EMBEDDED,
                f"--nbest {test_in} --source {SRC['test']} --images {C['feats']} --image-split {C['feat_split']} "
                f"--segment-images {IMG['test']} --folds {F} {scorers('{fold}', True)}",
            )
            add_rule(
                f"features-{c}-test-ss",
                f"{N}/test.{c}.ss.nbest",
                [test_in, F] + EMBEDDED,
                f"--nbest {test_in} --source {SRC['test']} --folds {F} {scorers('{fold}', False)}",
            )
            for fold in FOLDS:
                val_in = list_in(v, "val", n)
                add_rule(
                    f"features-{c}-val-f{fold}",
                    f"{N}/val.{c}.f{fold}.nbest",
                    [val_in] + EMBEDDED,
                    f"--nbest {val_in} --source {SRC['val']} {scorers(fold, False)}",
                )
        else:
            for split in ("val", "test"):
                add_rule(
                    f"features-{c}-{split}",
                    f"{N}/{split}.{c}.si.nbest",
                    [list_in(v, split, n)] + EMBEDDED,
                    f"--nbest {list_in(v, split, n)} --source {SRC[split]} --images {C['images']} "
                    f"--image-split {C['image_names']} --segment-images {IMG[split]} {scorers('all', True)}",
                )


# --- tuning: REPLICAS MIRA replicas per row, and the reports ------------------------------
def rows_of(view, with_all):
    """(row name, directory, --feature-sets or "" for every column) of one view."""
    rows = [("+nmt", "nmt", "beam")]
    rows += [("+VSE", "vse", "beam,VSE")] if view != "val" else []
    rows += [(f"+MLMME beta={b}", f"b{b}", f"beam,MLMMEb{b}") for b in BETAS]  # s_s (and s_i where scored)
    if view != "val":  # the s_i ablation: the same models and tuning without s_i
        rows += [(f"+MLMME beta={b} (s_s only)", f"b{b}-ss", f"beam,MLMMEb{b}/ss") for b in BETAS]
    rows += [("+all", "all", "")] if with_all else []  # the main job's lists carry every feature
    return rows


def tune_command(c, view, directory, features, seed):
    sets = f" --feature-sets {features}" if features else ""
    if view == "crossfit":
        return (
            f"rerank crossfit --nbest {N}/test.{c}.si.nbest --ref {REF['test']} --folds {F} --tokenize none{sets} "
            f"--seed {seed} --quiet --out {directory}/test.seed{seed}.txt --weights-out {directory}/weights.seed{seed}.json"
        )
    if view == "val":  # fold k tuned on val with the fold-k model's s_s
        tunes = "; ".join(
            f"rerank tune --nbest {N}/val.{c}.f{k}.nbest --ref {REF['val']} --tokenize none{sets} --seed {seed} "
            f"--quiet --out {directory}/weights.seed{seed}.fold{k}.json 2>> {directory}/tune.log"
            for k in FOLDS
        )
        return (
            f"{tunes}; rerank apply --nbest {N}/test.{c}.ss.nbest --folds {F} "
            f"--weights {directory}/weights.seed{seed}.fold{{fold}}.json --out {directory}/test.seed{seed}.txt"
        )
    return (  # the paper's protocol, tuned on val
        f"rerank tune --nbest {N}/val.{c}.si.nbest --ref {REF['val']} --tokenize none{sets} --seed {seed} --quiet "
        f"--out {directory}/weights.seed{seed}.json 2>> {directory}/tune.log; "
        f"rerank apply --nbest {N}/test.{c}.si.nbest --weights {directory}/weights.seed{seed}.json "
        f"--out {directory}/test.seed{seed}.txt"
    )


def view_lists(c, view):
    if view == "crossfit":
        return [f"{N}/test.{c}.si.nbest"]
    if view == "val":
        return [f"{N}/val.{c}.f{k}.nbest" for k in FOLDS] + [f"{N}/test.{c}.ss.nbest"]
    return [f"{N}/val.{c}.si.nbest", f"{N}/test.{c}.si.nbest"]


CAPTION = {
    "crossfit": f"test_2016, cross-fitted over {C['k']} folds by image (embedding models trained without the fold's "
    f"images; MIRA tuned on the other folds' lists); every row tuned so; {C['replicas']} MIRA replicas",
    "val": "test_2016, MIRA tuned on val as in the paper, s_s only (no val image features here: MLMME rows lack s_i, "
    "no +VSE row); fold k's hypotheses scored and selected with the fold-k embedding model and its val-tuned "
    f"weights; {C['replicas']} MIRA replicas",
    "paper": "test_2016, the paper's protocol: embedding models trained with train images, MIRA tuned on val with "
    f"s_s and s_i; {C['replicas']} MIRA replicas",
}
REPORTS = []
for v in C["variants"]:
    for n in C["sizes"]:
        c = f"{v}.{n}"
        for view in VIEWS:
            R = f"{OUT}/rerank/{c}.{view}"
            outputs, systems = [], []
            for row, directory, features in rows_of(view, shared(v, n)):
                for seed in SEEDS:
                    out = f"{R}/{directory}/test.seed{seed}.txt"
                    outputs.append(out)

                    rule:
                        name:
                            f"tune_{c}_{view}_{directory}_seed{seed}".replace(".", "_").replace("-", "_")
                        input:
                            view_lists(c, view),
                        output:
                            out,
                        benchmark:
                            bench(f"tune-{c}.{view}-{directory}-seed{seed}", out)
                        params:
                            cmd=fixed(f"mkdir -p {R}/{directory}; " + tune_command(c, view, f"{R}/{directory}", features, seed)),
                        shell:
                            "{params.cmd}"

                systems.append("--system " + shlex.quote(f"{row}={R}/{directory}/test.seed{{replica}}.txt"))

            rule:
                name:
                    f"experiment_{c}_{view}".replace(".", "_")
                input:
                    outputs,
                output:
                    f"{R}/experiment.json",
                params:
                    cmd=fixed(
                        f"rerank experiment {R} --ref {REF['test']} --baseline {baseline_of(v, n)} "
                        f"--nbest {list_in(v, 'test', n)} --tokenize none --caption {shlex.quote(CAPTION[view])} "
                        f"--replicas {C['replicas']} --paper-table {C['paper_table']} --paper-select nbest={n} "
                        f"--paper-select variant={v} {' '.join(systems)}"
                    ),
                shell:
                    "{params.cmd}"

            compare = "+nmt" if view == "val" else "+VSE"
            reports = [("report", compare, "")]
            if view != "val":  # do the embedding features add anything to the NMT features?
                reports.append(("report-vs-nmt", "+nmt", f" --out {R}/report-vs-nmt"))
            for folder, against, out_arg in reports:
                stage = f"report-{c}.{view}" + ("-vs-nmt" if folder != "report" else "")
                REPORTS.append(f"{R}/{folder}/table.json")

                rule:
                    name:
                        f"{folder}_{c}_{view}".replace(".", "_").replace("-", "_")
                    input:
                        f"{R}/experiment.json",
                        outputs,
                    output:
                        f"{R}/{folder}/table.json",
                    benchmark:
                        bench(stage, f"{R}/{folder}/table.json")
                    params:
                        cmd=fixed(
                            logged(
                                f"{R}/{folder}.log",
                                f"rerank report {R}{out_arg} --metrics {C['metrics']} --compare-to {shlex.quote(against)}",
                            )
                        ),
                    shell:
                        "{params.cmd}"


ISR = [f"{embed_dir(name, fold)}/isr.de.json" for fold in FOLDS for name in EMBEDDINGS] if CROSSFIT else []


rule tables:
    default_target: True
    input:
        REPORTS,
        ISR,
    output:
        f"{OUT}/tables.md",
    params:
        views=" ".join(VIEWS),
        variants=" ".join(C["variants"]),
        sizes=" ".join(str(n) for n in C["sizes"]),
        script=os.path.join(os.path.dirname(workflow.basedir), "scripts", "paper_tables.py"),
    shell:
        f"python {{params.script}} {OUT} --views '{{params.views}}' --variants '{{params.variants}}' "
        "--sizes '{params.sizes}'"


onsuccess:
    from timings import write_timings  # workflow/timings.py

    write_timings(OUT, STAGES)


onerror:
    from timings import write_timings

    write_timings(OUT, STAGES)
