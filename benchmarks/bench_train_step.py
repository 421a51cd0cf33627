"""Benchmark one training update of a transformer (``rerank nmt train --arch``) on the
CPU: fairseq's ``label_smoothed_cross_entropy`` against our
``fused_label_smoothed_cross_entropy`` (rerank/nmt/criterion.py), in float32 and with
``--bf16-autocast``.

The model, task and criterion are built from the very command line ``rerank nmt train``
runs (``rerank.nmt.train.train_command``), on real binarised data (default: the main job's
``out/multi30k-transformer/data/bin``), from the same initial weights for every variant;
each variant runs ``--updates`` Adam updates on the same training batches (4,000 tokens)
after ``--warm`` untimed ones, with ``--threads`` torch threads (the main job trains each
model on one thread, two side by side).  Reports seconds per update, target tokens per
second and the mean loss (bits per token, as fairseq logs it; dropout is random, so it
differs slightly between variants) — text, and JSON with ``--json``.

Measured 2026-11-25 on the 2-core AMD EPYC (AVX-512 BF16) idle, transformer-tiny,
one thread: fairseq 1.53 s / update, fused 1.35 s, fused + bf16 autocast 1.07–1.11 s.

    python benchmarks/bench_train_step.py --arch transformer-tiny --updates 20 --json out/bench_train_step.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")

VARIANTS = (
    ("fairseq", "label_smoothed_cross_entropy", False),
    ("fused", "fused_label_smoothed_cross_entropy", False),
    ("fused+bf16", "fused_label_smoothed_cross_entropy", True),
)


def build(bin_dir: str, arch: str, criterion: str, bf16: bool):
    """(task, model, criterion, optimiser) as fairseq-train builds them from our command line."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    from rerank.nmt.train import TrainConfig, train_command

    cmd = train_command(bin_dir, "/nonexistent", TrainConfig(arch=arch, bf16_autocast=bf16))
    args = cmd[cmd.index("fairseq_cli.train") + 1 :]
    args[args.index("--criterion") + 1] = criterion
    if criterion != "fused_label_smoothed_cross_entropy" and "--bf16-autocast" in args:
        args.remove("--bf16-autocast")
    parsed = options.parse_args_and_arch(options.get_training_parser(), args)
    cfg = convert_namespace_to_omegaconf(parsed)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    return task, task.build_model(cfg.model), task.build_criterion(cfg.criterion)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: python benchmarks/bench_train_step.py --updates 20",
    )
    p.add_argument(
        "--data-bin",
        default=os.path.join(ROOT, "out", "multi30k-transformer", "data", "bin"),
        help="binarised data (rerank nmt prepare's OUT/bin; default: the main job's)",
    )
    p.add_argument(
        "--arch",
        default="transformer-tiny",
        choices=["transformer-tiny", "transformer-small"],
        help="architecture (default transformer-tiny)",
    )
    p.add_argument("--updates", type=int, default=20, help="timed updates per variant (default 20)")
    p.add_argument("--warm", type=int, default=2, help="untimed updates first (default 2)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the main job)")
    p.add_argument("--json", default=None, help="also write the results here, e.g. out/bench_train_step.json")
    args = p.parse_args(argv)
    if not os.path.isdir(args.data_bin):
        print(
            f"bench_train_step: error: {args.data_bin}: no such directory (run the main job or give --data-bin)",
            file=sys.stderr,
        )
        return 1

    import torch

    import rerank.nmt.fairseq_user_dir  # noqa: F401  (registers our criterion)

    torch.set_num_threads(args.threads)
    logging.getLogger("fairseq").setLevel(logging.WARNING)
    rows, initial = [], None
    for name, criterion_name, bf16 in VARIANTS:
        task, model, criterion = build(args.data_bin, args.arch, criterion_name, bf16)
        if initial is None:
            initial = {k: v.clone() for k, v in model.state_dict().items()}
        model.load_state_dict(initial)
        model.train()
        batches = task.get_batch_iterator(
            task.dataset("train"), max_tokens=4000, seed=1, max_positions=(1024, 1024)
        ).next_epoch_itr(shuffle=True)
        batches = [next(batches) for _ in range(args.warm + args.updates)]
        optimiser = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98))
        losses, seconds, tokens = [], 0.0, 0
        for i, batch in enumerate(batches):
            start = time.perf_counter()
            optimiser.zero_grad()
            loss, sample_size, _ = criterion(model, batch)
            loss.backward()
            optimiser.step()
            if i >= args.warm:
                seconds += time.perf_counter() - start
                tokens += batch["ntokens"]
                losses.append(loss.item() / sample_size / 0.6931471805599453)
        rows.append(
            {
                "variant": name,
                "criterion": criterion_name,
                "bf16_autocast": bf16,
                "s_per_update": seconds / args.updates,
                "target_tokens_per_s": tokens / seconds,
                "loss_bits": sum(losses) / len(losses),
            }
        )
        print(
            f"{name:12s} {rows[-1]['s_per_update']:.3f} s/update  {rows[-1]['target_tokens_per_s']:7.0f} tok/s  "
            f"loss {rows[-1]['loss_bits']:.3f}",
            flush=True,
        )
    if args.json:
        import fairseq

        with open(args.json, "w") as handle:
            json.dump(
                {
                    "rows": rows,
                    "settings": vars(args),
                    "versions": {
                        "torch": torch.__version__,
                        "fairseq": fairseq.__version__,
                        "python": platform.python_version(),
                    },
                    "cpu": platform.processor() or platform.machine(),
                },
                handle,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
