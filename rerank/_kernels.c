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

/* ---------------------------------------------------------------------------------
 * TER (Snover et al. 2006) edit counts, following sacrebleu 2.x's lib_ter.py (itself a
 * port of Tercom) step by step: beam-restricted edit distance with Tercom's operation
 * preferences, greedy shifts ranked by (gain, length, -start, -target), at most
 * TER_MAX_SHIFT_CANDIDATES evaluated candidates per sentence.  Words are integer ids.
 * --------------------------------------------------------------------------------- */
#define TER_MAX_SHIFT_SIZE 10
#define TER_MAX_SHIFT_DIST 50
#define TER_BEAM_WIDTH 25
#define TER_MAX_SHIFT_CANDIDATES 1000
#define TER_INF ((int64_t)10000000000000000LL)

typedef struct {
    int64_t *cost;
    char *op;
    char *trace;
    int64_t cap;  /* cells allocated */
} ter_work;

/* Edit distance of hypothesis h (nh words) to reference r (nr words); trace receives the
 * operations from the start (' ' match, 's', 'i', 'd' as sacrebleu's BeamEditDistance),
 * *tlen their number.  Returns the distance. */
static int64_t ter_edit_distance(const int32_t *h, int64_t nh, const int32_t *r, int64_t nr, ter_work *wk,
                                 int64_t *tlen) {
    int64_t W = nr + 1;
    int64_t *cost = wk->cost;
    char *op = wk->op;
    for (int64_t j = 0; j <= nr; j++) { cost[j] = j; op[j] = 'i'; }
    for (int64_t i = 1; i <= nh; i++)
        for (int64_t j = 0; j <= nr; j++) { cost[i * W + j] = TER_INF; op[i * W + j] = 'x'; }
    double ratio = nh ? (double)nr / (double)nh : 1.0;
    int64_t beam = TER_BEAM_WIDTH;
    if (TER_BEAM_WIDTH < ratio / 2) beam = (int64_t)ceil(ratio / 2 + TER_BEAM_WIDTH);
    for (int64_t i = 1; i <= nh; i++) {
        int64_t diag = (int64_t)floor((double)i * ratio);
        int64_t min_j = diag - beam > 0 ? diag - beam : 0;
        int64_t max_j = diag + beam < nr + 1 ? diag + beam : nr + 1;
        if (i == nh) max_j = nr + 1;
        for (int64_t j = min_j; j < max_j; j++) {
            int64_t *c = &cost[i * W + j];
            char *o = &op[i * W + j];
            if (j == 0) {
                *c = cost[(i - 1) * W] + 1;
                *o = 'd';
                continue;
            }
            int same = h[i - 1] == r[j - 1];
            int64_t cands[3] = {cost[(i - 1) * W + j - 1] + (same ? 0 : 1), cost[(i - 1) * W + j] + 1,
                                cost[i * W + j - 1] + 1};
            char names[3] = {same ? ' ' : 's', 'd', 'i'};
            for (int k = 0; k < 3; k++)
                if (*c > cands[k]) { *c = cands[k]; *o = names[k]; }
        }
    }
    int64_t i = nh, j = nr, n = 0;
    while (i > 0 || j > 0) {
        char o = op[i * W + j];
        wk->trace[n++] = o;
        if (o == 's' || o == ' ') { i--; j--; }
        else if (o == 'i') j--;
        else if (o == 'd') i--;
        else return -1;
    }
    for (int64_t a = 0, b = n - 1; a < b; a++, b--) { char t = wk->trace[a]; wk->trace[a] = wk->trace[b]; wk->trace[b] = t; }
    *tlen = n;
    return cost[nh * W + nr];
}

/* dst[*len ...] += src[a:b] with Python slice clipping to n */
static void ter_append(int32_t *dst, int64_t *len, const int32_t *src, int64_t a, int64_t b, int64_t n) {
    if (a > n) a = n;
    if (b > n) b = n;
    for (int64_t k = a; k < b; k++) dst[(*len)++] = src[k];
}

static void ter_perform_shift(const int32_t *w, int64_t n, int64_t start, int64_t length, int64_t target, int32_t *out) {
    int64_t m = 0;
    if (target < start) {
        ter_append(out, &m, w, 0, target, n);
        ter_append(out, &m, w, start, start + length, n);
        ter_append(out, &m, w, target, start, n);
        ter_append(out, &m, w, start + length, n, n);
    } else if (target > start + length) {
        ter_append(out, &m, w, 0, start, n);
        ter_append(out, &m, w, start + length, target, n);
        ter_append(out, &m, w, start, start + length, n);
        ter_append(out, &m, w, target, n, n);
    } else {
        ter_append(out, &m, w, 0, start, n);
        ter_append(out, &m, w, start + length, length + target, n);
        ter_append(out, &m, w, start, start + length, n);
        ter_append(out, &m, w, length + target, n, n);
    }
}

/* Number of TER edits of h against r (sacrebleu's translation_edit_rate); -1 on error. */
static int64_t ter_edits(const int32_t *h0, int64_t nh, const int32_t *r, int64_t nr, ter_work *wk) {
    if (nr == 0) return nh;
    int32_t *cur = malloc((size_t)(nh + 1) * sizeof(int32_t));
    int32_t *cand = malloc((size_t)(nh + 1) * sizeof(int32_t));
    int32_t *best_words = malloc((size_t)(nh + 1) * sizeof(int32_t));
    int64_t *align = malloc((size_t)(nr + 1) * sizeof(int64_t));
    char *hyp_err = malloc((size_t)(nh + 1));
    char *ref_err = malloc((size_t)(nr + 1));
    int64_t result = -1;
    if (!cur || !cand || !best_words || !align || !hyp_err || !ref_err) goto done;
    memcpy(cur, h0, (size_t)nh * sizeof(int32_t));
    int64_t shifts = 0, checked = 0, tlen = 0;
    for (;;) {
        /* one round of _shift */
        int64_t pre = ter_edit_distance(cur, nh, r, nr, wk, &tlen);
        if (pre < 0) goto done;
        int64_t ph = -1, pr = -1, nhe = 0, nre = 0;
        for (int64_t k = 0; k < tlen; k++) {
            char o = wk->trace[k];
            if (o == 'i') o = 'd'; else if (o == 'd') o = 'i';  /* flip: rewrite reference into hypothesis */
            if (o == ' ' || o == 's') {
                ph++; pr++; align[pr] = ph;
                hyp_err[nhe++] = o == 's'; ref_err[nre++] = o == 's';
            } else if (o == 'i') {
                ph++; hyp_err[nhe++] = 1;
            } else {
                pr++; align[pr] = ph; ref_err[nre++] = 1;
            }
        }
        int have_best = 0;
        int64_t b_score = 0, b_len = 0, b_nstart = 0, b_nidx = 0;
        for (int64_t sh = 0; sh < nh && checked < TER_MAX_SHIFT_CANDIDATES; sh++) {
            int stop = 0;
            for (int64_t sr = 0; sr < nr; sr++) {
                if (llabs(sr - sh) > TER_MAX_SHIFT_DIST) continue;
                int64_t length = 0;
                while (cur[sh + length] == r[sr + length] && length < TER_MAX_SHIFT_SIZE) {
                    length++;
                    /* candidate (sh, sr, length) */
                    int skip = 0;
                    int64_t e = 0;
                    for (int64_t k = sh; k < sh + length; k++) e += hyp_err[k];
                    if (e == 0) skip = 1;
                    if (!skip) {
                        e = 0;
                        for (int64_t k = sr; k < sr + length; k++) e += ref_err[k];
                        if (e == 0) skip = 1;
                    }
                    if (!skip && sh <= align[sr] && align[sr] < sh + length) skip = 1;
                    if (!skip) {
                        int64_t prev = -1;
                        for (int64_t off = -1; off < length; off++) {
                            int64_t idx;
                            if (sr + off == -1) idx = 0;
                            else if (sr + off < nr) idx = align[sr + off] + 1;
                            else break;
                            if (idx == prev) continue;
                            prev = idx;
                            ter_perform_shift(cur, nh, sh, length, idx, cand);
                            int64_t tl2;
                            int64_t d = ter_edit_distance(cand, nh, r, nr, wk, &tl2);
                            if (d < 0) goto done;
                            int64_t score = pre - d;
                            checked++;
                            int better = !have_best || score > b_score ||
                                (score == b_score && (length > b_len || (length == b_len &&
                                 (-sh > b_nstart || (-sh == b_nstart && -idx > b_nidx)))));
                            if (better) {
                                have_best = 1; b_score = score; b_len = length; b_nstart = -sh; b_nidx = -idx;
                                memcpy(best_words, cand, (size_t)nh * sizeof(int32_t));
                            }
                        }
                        if (checked >= TER_MAX_SHIFT_CANDIDATES) { stop = 1; break; }
                    }
                    if (nh == sh + length || nr == sr + length) break;
                }
                if (stop) break;
            }
            if (stop) break;
        }
        int64_t delta = have_best ? b_score : 0;
        if (checked >= TER_MAX_SHIFT_CANDIDATES) break;
        if (delta <= 0) break;
        shifts++;
        memcpy(cur, best_words, (size_t)nh * sizeof(int32_t));
    }
    {
        int64_t d = ter_edit_distance(cur, nh, r, nr, wk, &tlen);
        if (d >= 0) result = shifts + d;
    }
done:
    free(cur); free(cand); free(best_words); free(align); free(hyp_err); free(ref_err);
    return result;
}

/* edits[k] = TER edits of hypothesis k (words h_ids[h_off[k]:h_off[k+1]]) against reference k.
 * Returns 0, or -1 on error. */
int ter_stats(const int32_t *h_ids, const int64_t *h_off, const int32_t *r_ids, const int64_t *r_off, int64_t n,
              double *edits) {
    int64_t max_cells = 1, max_len = 1;
    for (int64_t k = 0; k < n; k++) {
        int64_t nh = h_off[k + 1] - h_off[k], nr = r_off[k + 1] - r_off[k];
        if ((nh + 1) * (nr + 1) > max_cells) max_cells = (nh + 1) * (nr + 1);
        if (nh + nr + 2 > max_len) max_len = nh + nr + 2;
    }
    ter_work wk;
    wk.cost = malloc((size_t)max_cells * sizeof(int64_t));
    wk.op = malloc((size_t)max_cells);
    wk.trace = malloc((size_t)max_len);
    wk.cap = max_cells;
    int status = 0;
    if (!wk.cost || !wk.op || !wk.trace) status = -1;
    for (int64_t k = 0; k < n && status == 0; k++) {
        int64_t e = ter_edits(h_ids + h_off[k], h_off[k + 1] - h_off[k], r_ids + r_off[k], r_off[k + 1] - r_off[k], &wk);
        if (e < 0) status = -1;
        else edits[k] = (double)e;
    }
    free(wk.cost); free(wk.op); free(wk.trace);
    return status;
}
