"""fairseq ``--user-dir`` entry point: importing it registers our models and the
criterion ``fused_label_smoothed_cross_entropy`` (:mod:`rerank.nmt.criterion`), lets
torch load checkpoints weights-only with the classes fairseq's hold
(:mod:`rerank.nmt.checkpoints`), gives
fairseq 0.12 the ``numpy.compat.long`` it still names (removed in numpy 2; it was
Python's ``int``, a 64-bit integer dtype) — the language-model datasets
(``TokenBlockDataset``) need it — and makes a resumed training build its batches as the
uninterrupted one does (``_batches_of_the_first_epoch``)."""

import types

import numpy as np

if not hasattr(np, "compat"):
    setattr(np, "compat", types.SimpleNamespace(long=np.int64))  # noqa: B010 (numpy 2 dropped np.compat)

from fairseq.tasks.fairseq_task import FairseqTask  # noqa: E402

import rerank.nmt.bahdanau  # noqa: E402,F401  (registers bahdanau_gru and its architectures)
import rerank.nmt.criterion  # noqa: E402,F401  (registers fused_label_smoothed_cross_entropy)
from rerank.nmt.checkpoints import allow_fairseq_globals  # noqa: E402

allow_fairseq_globals()  # checkpoints load weights-only with fairseq's own classes (rerank.nmt.checkpoints)

_get_batch_iterator = FairseqTask.get_batch_iterator


def _batches_of_the_first_epoch(self, dataset, *args, epoch=1, **kwargs):
    """``FairseqTask.get_batch_iterator`` whose batches are made as in epoch 1, so that a
    training resumed from ``checkpoint_last.pt`` continues exactly as the uninterrupted one.

    fairseq 0.12 builds the training batches once per process, ordering the examples under
    the seed ``seed + epoch`` of the epoch the process starts in, and reuses them in every
    later epoch (shuffling their order per epoch). An uninterrupted training therefore uses
    the batches of ``seed + 1`` throughout, but a training resumed at epoch 9 those of
    ``seed + 9``: other batch contents, another model (measured on Multi30k: valid NLL 2.693
    against 2.682 after 22 epochs, test BLEU ±0.3). Here a new iterator is always built as
    in epoch 1 and then set to ``epoch``; ``load_state_dict`` restores the epoch and the
    position from the checkpoint, and the per-epoch shuffle and dropout seeds
    (``seed + epoch``, ``seed + updates``) are fairseq's own. An iterator fairseq reuses
    from its cache, and any other case (rebuilt batches, no cache), is left to fairseq.
    """
    fresh = (
        epoch != 1
        and dataset not in self.dataset_to_epoch_iter
        and not kwargs.get("disable_iterator_cache")
        and not kwargs.get("update_epoch_batch_itr")
        and self.can_reuse_epoch_itr(dataset)
        and not getattr(self.cfg, "rebuild_batches", False)
    )
    if not fresh:
        return _get_batch_iterator(self, dataset, *args, epoch=epoch, **kwargs)
    iterator = _get_batch_iterator(self, dataset, *args, epoch=1, **kwargs)
    iterator.epoch = epoch
    return iterator


FairseqTask.get_batch_iterator = _batches_of_the_first_epoch
