/* Compiled inner loops of the tuners in rerank/tuning/, loaded with ctypes by rerank/tuning/_native.py.
 *
 * Plain C99, no Python API, compiled by `pip install` (setup.py).
 *
 *   mira_epoch        one epoch of k-best batch MIRA (Cherry & Foster 2012, Moses kbmira)
 *   model_best_stats  summed statistics (any metric's) of the model-best hypotheses under w
 *   mert_envelope     Och (2003): each segment's upper envelope along a direction (any metric)
 *   mert_line_search  Och (2003) exact line search of corpus BLEU along a direction
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bleu_layout.h"

/* kbmira's sentenceLevelBackgroundBleu: exp(mean log p_n + min(0, 1 - r/t1)) * r over
 * row + background; (prod p_n)^(1/4) instead of 8 logs. */
static double background_bleu(const double *row, const double *bg) {
    double ratio = 1.0;
    for (int n = 0; n < ORDER; n++) ratio *= (row[2 * n] + bg[2 * n]) / (row[2 * n + 1] + bg[2 * n + 1]);
    double bleu = pow(ratio, 1.0 / ORDER);
    double ref = row[REF_LEN] + bg[REF_LEN];
    double brevity = 1.0 - ref / (row[1] + bg[1]);
    if (brevity < 0.0) bleu *= exp(brevity);
    return bleu * ref;
}

/* One MIRA epoch over the sentences in `order`, in place on w, totals, bg and
 * *num_updates (see rerank/tuning/mira.py for the algorithm).  Returns the number of updates;
 * *loss_out receives the summed loss. */
int64_t mira_epoch(const double *features, int64_t F, const double *stats, const int64_t *offsets,
                   const int64_t *order, int64_t n_order, double *w, double *totals, int64_t *num_updates,
                   double *bg, double C, double decay, int model_bg, double *loss_out) {
    int64_t updates = 0;
    double total_loss = 0.0;
    double *diff = malloc((size_t)(F > 0 ? F : 1) * sizeof(double));
    if (!diff) return -1;
    for (int64_t k = 0; k < n_order; k++) {
        int64_t s = order[k], start = offsets[s], end = offsets[s + 1];
        int64_t hope = start, fear = start, model = start;
        double hope_score = 0, fear_score = 0, model_score = 0, hope_bleu = 0, fear_bleu = 0;
        for (int64_t i = start; i < end; i++) {
            double score = 0.0;
            for (int64_t f = 0; f < F; f++) score += features[i * F + f] * w[f];
            double bleu = background_bleu(stats + i * NUM_STATS, bg);
            if (i == start || score + bleu > hope_score) { hope_score = score + bleu; hope = i; hope_bleu = bleu; }
            if (i == start || score - bleu > fear_score) { fear_score = score - bleu; fear = i; fear_bleu = bleu; }
            if (i == start || score > model_score) { model_score = score; model = i; }
        }
        if (hope != fear && hope_bleu > fear_bleu) {
            double diff_score = 0.0, sq = 0.0;
            for (int64_t f = 0; f < F; f++) {
                diff[f] = features[hope * F + f] - features[fear * F + f];
                diff_score += diff[f] * w[f];
                sq += diff[f] * diff[f];
            }
            double loss = (hope_bleu - fear_bleu) - diff_score;
            if (loss > 0.0) {
                double eta = (sq == 0.0 || loss / sq > C) ? C : loss / sq;
                (*num_updates)++;
                for (int64_t f = 0; f < F; f++) {
                    w[f] += eta * diff[f];
                    totals[f] += w[f];
                }
                total_loss += loss;
                updates++;
            }
            const double *src = stats + (model_bg ? model : hope) * NUM_STATS;
            for (int j = 0; j < NUM_STATS; j++) bg[j] = bg[j] * decay + src[j];
        }
    }
    free(diff);
    *loss_out = total_loss;
    return updates;
}

/* total[0:K] = summed statistics (K per row) of argmax_i features[i]·w per segment (first on ties). */
void model_best_stats(const double *features, int64_t F, const double *stats, int64_t K, const int64_t *offsets,
                      int64_t N, const double *w, double *total) {
    for (int64_t j = 0; j < K; j++) total[j] = 0.0;
    for (int64_t s = 0; s < N; s++) {
        int64_t best = offsets[s];
        double best_score = 0.0;
        for (int64_t i = offsets[s]; i < offsets[s + 1]; i++) {
            double score = 0.0;
            for (int64_t f = 0; f < F; f++) score += features[i * F + f] * w[f];
            if (i == offsets[s] || score > best_score) { best = i; best_score = score; }
        }
        for (int64_t j = 0; j < K; j++) total[j] += stats[best * K + j];
    }
}


/* Corpus BLEU (0-100) of summed statistics, exactly rerank.metrics.bleu_stats.bleu_from_stats
 * (sacrebleu's corpus BLEU with 'exp' smoothing). */
static double corpus_bleu(const double *s) {
    int any = 0;
    for (int n = 0; n < ORDER; n++) {
        if (s[2 * n + 1] <= 0.0) return 0.0;
        if (s[2 * n] > 0.0) any = 1;
    }
    if (!any) return 0.0;
    double smooth = 1.0, log_sum = 0.0;
    for (int n = 0; n < ORDER; n++) {
        double p;
        if (s[2 * n] == 0.0) {
            smooth *= 2.0;
            p = 100.0 / (smooth * s[2 * n + 1]);
        } else {
            p = 100.0 * s[2 * n] / s[2 * n + 1];
        }
        log_sum += log(p);
    }
    double sys = s[1], ref = s[REF_LEN];
    double bp = sys < ref ? (sys > 0.0 ? exp(1.0 - ref / sys) : 0.0) : 1.0;
    return bp * exp(log_sum / ORDER);
}

/* Line i beats line j just after a common point: larger slope, then larger intercept,
 * then the earlier row (select_best's tie rule for identical lines). */
static int line_beats(const double *a, const double *b, int64_t i, int64_t j) {
    if (b[i] != b[j]) return b[i] > b[j];
    if (a[i] != a[j]) return a[i] > a[j];
    return i < j;
}

typedef struct {
    double gamma;
    int64_t delta;  /* row of the statistics change in the deltas buffer */
} mert_breakpoint;

static int cmp_breakpoint(const void *x, const void *y) {
    double a = ((const mert_breakpoint *)x)->gamma, b = ((const mert_breakpoint *)y)->gamma;
    return (a > b) - (a < b);
}

/* Walk the upper envelope of segment rows [lo, hi) from gamma = -inf (Och 2003): start
 * at the smallest slope (larger intercept, earlier row on ties); the next line is the one
 * that overtakes the current first, the steepest among those overtaking at once (ties
 * between identical lines: the earlier row, as model_best_stats).  O(n · envelope size),
 * no sorting.  Returns the row selected at -inf; each change of the selected row is
 * written at gammas/from/to[*nb], and *nb advanced. */
static int64_t walk_envelope(const double *a, const double *b, int64_t lo, int64_t hi, double *gammas,
                             int64_t *from, int64_t *to, int64_t *nb) {
    int64_t cur = lo;
    for (int64_t i = lo + 1; i < hi; i++)
        if (b[i] < b[cur] || (b[i] == b[cur] && (a[i] > a[cur]))) cur = i;
    int64_t first = cur;
    double x_cur = -INFINITY;
    for (;;) {
        int64_t next = -1;
        double x_next = INFINITY;
        for (int64_t i = lo; i < hi; i++) {
            if (b[i] <= b[cur]) continue;
            double x = (a[cur] - a[i]) / (b[i] - b[cur]);
            if (x < x_cur) x = x_cur;  /* rounding: never step back */
            if (next < 0 || x < x_next || (x == x_next && line_beats(a, b, i, next))) {
                next = i;
                x_next = x;
            }
        }
        if (next < 0) break;
        gammas[*nb] = x_next;
        from[*nb] = cur;
        to[*nb] = next;
        (*nb)++;
        cur = next;
        x_cur = x_next;
    }
    return first;
}

/* Every segment's envelope along the line (a + gamma·b): first[s] = the row selected at
 * gamma = -inf; the changes (gammas, from, to) in segment order, each array of room M.
 * Returns their number.  The sweep over them is the caller's (rerank/tuning/mert.py), for
 * statistics of any metric. */
int64_t mert_envelope(const double *a, const double *b, const int64_t *offsets, int64_t N, int64_t *first,
                      double *gammas, int64_t *from, int64_t *to) {
    int64_t nb = 0;
    for (int64_t s = 0; s < N; s++) first[s] = walk_envelope(a, b, offsets[s], offsets[s + 1], gammas, from, to, &nb);
    return nb;
}

/* Exact line search (Och 2003, section 6; Moses mert's Optimizer::LineOptimize).
 * Hypothesis i scores a[i] + gamma * b[i] on the line w + gamma * d (a = features·w,
 * b = features·d).  For each segment the upper envelope of its lines gives the
 * hypothesis selected on each gamma interval (ties between identical lines: the earlier
 * row, as model_best_stats), found by walking it in O(n · envelope size) without
 * sorting; the breakpoints of all segments, sorted, split
 * the line into intervals of constant corpus statistics, swept once.  Chooses the
 * interval of highest corpus BLEU (ties: the one holding gamma = 0, else the one whose
 * point is nearest 0) and returns its point: 0 if it holds 0, else its midpoint, or the
 * outermost breakpoint -/+ max(1, |breakpoint|) for an unbounded interval.
 * out[0] = gamma, out[1] = its BLEU.  Returns the number of breakpoints, -1 without memory. */
int64_t mert_line_search(const double *a, const double *b, const double *stats, const int64_t *offsets, int64_t N,
                         double *out) {
    int64_t M = offsets[N];
    size_t room = (size_t)(M > 0 ? M : 1);
    mert_breakpoint *bps = malloc(room * sizeof(mert_breakpoint));
    double *gammas = malloc(room * sizeof(double));
    int64_t *from = malloc(room * sizeof(int64_t)), *to = malloc(room * sizeof(int64_t));
    double *deltas = malloc(room * NUM_STATS * sizeof(double));  /* statistics change of each breakpoint */
    if (!bps || !gammas || !from || !to || !deltas) {
        free(bps); free(gammas); free(from); free(to); free(deltas);
        return -1;
    }
    double cur_stats[NUM_STATS];
    for (int j = 0; j < NUM_STATS; j++) cur_stats[j] = 0.0;
    int64_t nb = 0;
    for (int64_t s = 0; s < N; s++) {
        int64_t start_nb = nb;
        int64_t first = walk_envelope(a, b, offsets[s], offsets[s + 1], gammas, from, to, &nb);
        for (int j = 0; j < NUM_STATS; j++) cur_stats[j] += stats[first * NUM_STATS + j];
        for (int64_t e = start_nb; e < nb; e++) {  /* while the segment's rows are in cache */
            bps[e].gamma = gammas[e];
            bps[e].delta = e;
            for (int j = 0; j < NUM_STATS; j++)
                deltas[e * NUM_STATS + j] = stats[to[e] * NUM_STATS + j] - stats[from[e] * NUM_STATS + j];
        }
    }
    qsort(bps, (size_t)nb, sizeof(mert_breakpoint), cmp_breakpoint);
    /* interval (lo, hi) of constant statistics cur; candidate point and its BLEU */
    double best_gamma = 0.0, best_bleu = -1.0, best_dist = INFINITY;
    int best_has_zero = 0;
    double lo = -INFINITY;
    int64_t e = 0;
    for (;;) {
        double hi = e < nb ? bps[e].gamma : INFINITY;
        double point;
        int has_zero = lo < 0.0 && 0.0 < hi;
        if (has_zero || (lo == -INFINITY && hi == INFINITY)) point = 0.0;
        else if (lo == -INFINITY) point = hi - fmax(1.0, fabs(hi));
        else if (hi == INFINITY) point = lo + fmax(1.0, fabs(lo));
        else point = 0.5 * (lo + hi);
        double bleu = corpus_bleu(cur_stats), dist = fabs(point);
        if (bleu > best_bleu || (bleu == best_bleu && !best_has_zero && (has_zero || dist < best_dist))) {
            best_bleu = bleu;
            best_gamma = point;
            best_dist = dist;
            best_has_zero = has_zero;
        }
        if (e >= nb) break;
        double g = bps[e].gamma;
        while (e < nb && bps[e].gamma == g) {  /* every change at this gamma */
            const double *change = deltas + bps[e].delta * NUM_STATS;
            for (int j = 0; j < NUM_STATS; j++) cur_stats[j] += change[j];
            e++;
        }
        lo = g;
    }
    out[0] = best_gamma;
    out[1] = best_bleu;
    free(bps); free(gammas); free(from); free(to); free(deltas);
    return nb;
}
