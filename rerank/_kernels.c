/* Compiled inner loops of rerank, loaded with ctypes by rerank/_native.py.
 *
 * Plain C99, no Python API: built by setup.py as an extension file so that
 * `pip install` compiles it; nothing here allocates Python objects.
 *
 *   clipped_matches   clipped n-gram matches per hypothesis (sorted merge): BLEU, and
 *                     chrF's character n-grams for the consensus features
 *   sort_runs         sorts each text's n-gram codes once, for many pairwise merges
 *   ter_stats         TER edit counts (sacrebleu's lib_ter)
 * The tuners' loops (MIRA, MERT) live in rerank/tuning/_kernels.c.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* Sort in place the valid codes of every run: for each order n (row n of codes), the
 * codes at start[k] .. start[k]+len[k]-n-1 of each run k (its (n+1)-grams). */
int sort_runs(int64_t *codes, int64_t L, int orders, const int64_t *start, const int64_t *len, int64_t K) {
    int64_t width = 1;
    for (int64_t k = 0; k < K; k++)
        if (len[k] > width) width = len[k];
    int64_t *buf = malloc((size_t)width * sizeof(int64_t));
    if (!buf) return -1;
    for (int n = 0; n < orders; n++) {
        int64_t *row = codes + (int64_t)n * L;
        for (int64_t k = 0; k < K; k++) {
            int64_t m = len[k] - n > 0 ? len[k] - n : 0;
            sorted_copy(row + start[k], m, buf);
            memcpy(row + start[k], buf, (size_t)m * sizeof(int64_t));
        }
    }
    free(buf);
    return 0;
}

/* codes: orders x L n-gram codes (row n: n-gram of order n+1 starting at each token,
 * any value where it would cross a line end: only the first len-n of a line are read);
 * hypothesis h occupies tokens h_start[h] .. h_start[h]+h_len[h], its reference
 * r_start[s] .. r_start[s]+r_len[s] with s = segment[h]; consecutive hypotheses with the
 * same reference share its sorted copy.  With `presorted`, every run's valid codes are
 * sorted already (sort_runs) and are merged in place, without copies.
 * out[h*orders + n] = sum over distinct n-grams of min(count_h, count_ref).
 * Returns 0, or -1 when memory runs out. */
int clipped_matches(const int64_t *codes, int64_t L, int orders, const int64_t *h_start, const int64_t *h_len,
                    int64_t M, const int64_t *r_start, const int64_t *r_len, const int64_t *segment, int presorted,
                    double *out) {
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
    for (int n = 0; n < orders; n++) {
        const int64_t *row = codes + (int64_t)n * L;
        int64_t last = -1, nr = 0;
        const int64_t *r = ref;
        for (int64_t h = 0; h < M; h++) {
            int64_t s = segment[h];
            if (s != last) {
                nr = r_len[s] - n > 0 ? r_len[s] - n : 0;
                if (presorted) r = row + r_start[s];
                else sorted_copy(row + r_start[s], nr, ref);
                last = s;
            }
            int64_t nh = h_len[h] - n > 0 ? h_len[h] - n : 0;
            const int64_t *y = hyp;
            if (presorted) y = row + h_start[h];
            else sorted_copy(row + h_start[h], nh, hyp);
            int64_t i = 0, j = 0, m = 0;
            while (i < nh && j < nr) {
                if (y[i] < r[j]) i++;
                else if (y[i] > r[j]) j++;
                else { m++; i++; j++; }  /* one clipped match per pair of equal occurrences */
            }
            out[h * orders + n] = (double)m;
        }
    }
    free(hyp);
    free(ref);
    return 0;
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
