/* The BLEU sufficient-statistics layout shared by every C kernel of the project
 * (rerank/_kernels.c, rerank/tuning/_kernels.c).  Python's side is rerank/metrics/bleu_stats.py (ORDER,
 * NUM_STATS, REF_LEN); a row is [m1 t1 m2 t2 m3 t3 m4 t4 r] (Moses BleuScorer order). */
#ifndef RERANK_BLEU_LAYOUT_H
#define RERANK_BLEU_LAYOUT_H
#define ORDER 4
#define NUM_STATS (2 * ORDER + 1)
#define REF_LEN (2 * ORDER)
#endif
