/* Compiled inner loops of rerank, loaded with ctypes by rerank/_native.py.
 *
 * Plain C99, no Python API: built by setup.py as an extension file so that
 * `pip install` compiles it; nothing here allocates Python objects.
 *
 *   clipped_matches   BLEU clipped n-gram matches per hypothesis (sorted merge)
 *   mira_epoch        one epoch of k-best batch MIRA (Cherry & Foster 2012, Moses kbmira)
 *   model_best_stats  summed BLEU statistics of the model-best hypotheses
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ORDER 4
#define NUM_STATS (2 * ORDER + 1)
#define REF_LEN (2 * ORDER)

static int cmp_int64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* buf[0:n] = sorted(src[0:n]); insertion sort for the short lines of n-best lists */
static void sorted_copy(const int64_t *src, int64_t n, int64_t *buf) {
    if (n > 64) {
        memcpy(buf, src, (size_t)n * sizeof(int64_t));
        qsort(buf, (size_t)n, sizeof(int64_t), cmp_int64);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t v = src[i], j = i - 1;
        while (j >= 0 && buf[j] > v) {
            buf[j + 1] = buf[j];
            j--;
        }
        buf[j + 1] = v;
    }
}

/* codes: ORDER x L n-gram codes (row n: n-gram of order n+1 starting at each token);
 * hypothesis h occupies tokens h_start[h] .. h_start[h]+h_len[h], its reference
 * r_start[s] .. r_start[s]+r_len[s] with s = segment[h]; hypotheses of a segment are
 * contiguous.  out[h*ORDER + n] = sum over distinct n-grams of min(count_h, count_ref).
 * Returns 0, or -1 when memory runs out. */
int clipped_matches(const int64_t *codes, int64_t L, const int64_t *h_start, const int64_t *h_len, int64_t M,
                    const int64_t *r_start, const int64_t *r_len, const int64_t *segment, double *out) {
    int64_t width = 1;
    for (int64_t h = 0; h < M; h++) {
        if (h_len[h] > width) width = h_len[h];
        if (r_len[segment[h]] > width) width = r_len[segment[h]];
    }
    int64_t *hyp = malloc((size_t)width * sizeof(int64_t));
    int64_t *ref = malloc((size_t)width * sizeof(int64_t));
    if (!hyp || !ref) {
        free(hyp);
        free(ref);
        return -1;
    }
    for (int n = 0; n < ORDER; n++) {
        const int64_t *row = codes + (int64_t)n * L;
        int64_t last = -1, nr = 0;
        for (int64_t h = 0; h < M; h++) {
            int64_t s = segment[h];
            if (s != last) {
                nr = r_len[s] - n > 0 ? r_len[s] - n : 0;
                sorted_copy(row + r_start[s], nr, ref);
                last = s;
            }
            int64_t nh = h_len[h] - n > 0 ? h_len[h] - n : 0;
            sorted_copy(row + h_start[h], nh, hyp);
            int64_t i = 0, j = 0, m = 0;
            while (i < nh && j < nr) {
                if (hyp[i] < ref[j]) i++;
                else if (hyp[i] > ref[j]) j++;
                else { m++; i++; j++; }  /* one clipped match per pair of equal occurrences */
            }
            out[h * ORDER + n] = (double)m;
        }
    }
    free(hyp);
    free(ref);
    return 0;
}

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
 * *num_updates (see mira/kbmira.py for the algorithm).  Returns the number of updates;
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

/* total[0:NUM_STATS] = summed statistics of argmax_i features[i]·w per segment (first on ties). */
void model_best_stats(const double *features, int64_t F, const double *stats, const int64_t *offsets, int64_t N,
                      const double *w, double *total) {
    for (int j = 0; j < NUM_STATS; j++) total[j] = 0.0;
    for (int64_t s = 0; s < N; s++) {
        int64_t best = offsets[s];
        double best_score = 0.0;
        for (int64_t i = offsets[s]; i < offsets[s + 1]; i++) {
            double score = 0.0;
            for (int64_t f = 0; f < F; f++) score += features[i * F + f] * w[f];
            if (i == offsets[s] || score > best_score) { best = i; best_score = score; }
        }
        for (int j = 0; j < NUM_STATS; j++) total[j] += stats[best * NUM_STATS + j];
    }
}
