/* Private pieces of `linattn eval` (docs/design.md §8), shared by its files. Collective
 * unless noted. */
#ifndef LINATTN_EVAL_H
#define LINATTN_EVAL_H
#include <stdio.h>
#include "cli.h"
#include "linattn/dist.h"
#include "linattn/linattn.h"
#include "linattn/study.h"

/* Rank 0's CSV texts, each rewritten atomically into the output folder as rows arrive. */
typedef struct {
  char *buf;
  size_t len;
  FILE *f; /* open_memstream on rank 0, NULL elsewhere */
  const char *name;
} la_csv;

#define SAMPLE_ROWS 64   /* rows.csv: evenly spaced tokens, every head */
#define BIAS_SIDE 64     /* kernel bias: 64 x 64 evenly spaced (query, key) entries per head */

/* One (n, input scale) of the sweep (eval_data.c): this rank's rows and the references. */
typedef struct {
  int64_t n, nloc, row0;
  int H, dk, dv;
  double *q, *k, *v, *g;     /* this rank's rows, Q and K scaled */
  double *kall, *qall;       /* every key and query (the floor, up to --floor-max-n), or NULL */
  int sampled;               /* n > --softmax-max-n: out_rel_err on the kernel rows only (§8.7) */
  double s;                  /* the similarity scale */
  int nm;                    /* modes */
  la_mode modes[2];
  double *sm[2][4];          /* softmax out, dq, dk, dv for this rank's rows, per mode */
  double sm_norm2[2][4];     /* their squared norms over all ranks */
  int64_t nkr, *krows;       /* kernel rows owned here (global positions), and their q */
  double *kq;
  int64_t kernel_rows;       /* per head, over all ranks */
  int64_t *kall_rows, kr_off;/* every kernel row (global positions); krows[0] is kall_rows[kr_off] */
  double *kq_all;            /* their queries, on every rank [kernel_rows, H, dk] */
  int64_t nsr, *srows;       /* rows.csv sample owned here */
  double *sq;
  double *sv;                /* singular values [H, n], or NULL above --floor-max-n */
  int rvec, tvf;             /* leading singular vectors kept (weights_tv_floor), and tvf = rvec > 0 */
  double *fu, *fv;           /* [H][n][rvec]: U and V of the floor's SVD */
  int ntvc, tvc_r[64];       /* weights_tv_floor per r computed so far (per mode) */
  double tvc_v[64][2];
  int64_t ner, *erows, nek, *ekeys; /* kernel-bias entries: owned query rows x every key */
  double *eq, *ek, eshift, eref2;
  double t_refs, t_floor;    /* rank 0's seconds in the references and the floor */
  double *lg;                /* --decay: ln gamma_h [H] (the softmax references and the decayed
                              * quadratic form weigh pairs by gamma_h^|i-j|, §8.1), or NULL */
} la_eval_data;

/* Not Collective: frees every buffer of x and zeroes it. */
void la_eval_data_free(la_eval_data *x);
/* Not Collective: the threads --threads T gives (the OpenMP default when T <= 0). */
int la_eval_threads(int T);
/* Not Collective: n doubles (at least one), or NULL. */
double *la_eval_dalloc(int64_t n);
/* Inputs of length n (the files, or the generator at n), this rank's rows in float64. */
la_status la_eval_data_read(la_dist d, const la_cli *o, int64_t n, la_eval_data *x);
/* Everything that depends on (data, n, input scale a) and not on the map: the references,
 * from the unscaled rows base (Q, K); the references' rows go to refs. */
la_status la_eval_data_prepare(la_dist d, const la_cli *o, la_eval_data *x, double a, la_csv *refs,
                               double *base[2]);
/* weights_tv_floor (§8.2) at rank r, once per r: this rank's kernel rows, summed over ranks. */
la_status la_eval_tv_floor_get(la_dist d, la_eval_data *x, int r, int threads);
/* Not Collective: the value la_eval_tv_floor_get computed, or NaN. */
double la_eval_tv_floor_of(const la_eval_data *x, int r, int mi);

/* Not Collective: the m positions floor((2a+1) n / 2m), a < m, evenly spread over [0, n)
 * (all of [0, n) when m >= n); returns their count. idx has room for min(m, n). */
int64_t la_even_rows(int64_t n, int64_t m, int64_t *idx);

/* The associative-recall check (recall.csv, docs/design.md §8.5): every (map, width, pairs,
 * trial) is one item, items are dealt to the ranks in turn, counts are summed on rank 0. */
la_status la_eval_recall(la_dist d, const la_cli *o, la_csv *csv);

/* The kernel pass over the kernel rows (program/eval_sample.c; docs/design.md §8.2, §8.7): each
 * rank passes its own keys and values (nk from global position j0) and every kernel row's
 * query (q [nq, H, dk], rows ascending); ss is created here and receives, on every rank, the
 * sums combined over all keys (la_shard_sums, study.h), tv included. The caller frees ss
 * (la_shard_sums_free) whatever the status. */
la_status la_eval_kernel_pass(la_dist d, const la_featmap fm, double scale, int64_t j0, int64_t nk,
                              const double *k, const double *v, int64_t nq, const int64_t *rows,
                              const double *q, int nmodes, const la_mode *modes, int dv,
                              int threads, la_shard_sums *ss);
/* Collective: kernel sums merged over ranks in rank order (the same on every rank). */
la_status la_eval_kernel_sums_allreduce(la_dist d, la_kernel_sums *ks);
/* Not Collective: weights_tv of mode mi from combined sums: the mean over (row, head) of
 * 0.5 sum_j |p_ij - w_ij|; a row whose map weights do not sum to a positive number counts 1. */
double la_eval_weights_tv(const la_shard_sums *ss, int mi);

/* --decay (docs/design.md §8.1 "With decay"): the decayed quadratic form of the map on the kernel
 * rows (every rank passes all nq of them, q [nq, H, dk], rows ascending, and its own keys from
 * global position j0), lg [H] = ln gamma_h:
 *   quad_i = sum_{j in A(i)} gamma_h^|i-j| khat_ij v_j / sum_{j in A(i)} gamma_h^|i-j| khat_ij,
 * combined over ranks (a max of the row's log-scale, a rescale, a sum). quad [nmodes][nq][H][dv]
 * and lden [nmodes][nq][H] (the log of the denominator sum) on every rank. */
la_status la_eval_decay_quad(la_dist d, const la_featmap fm, const double *lg, int64_t j0, int64_t nk,
                             const double *k, const double *v, int64_t nq, const int64_t *rows,
                             const double *q, int nmodes, const la_mode *modes, int dv,
                             double *quad, double *lden);
/* Not Collective: *lg = ln gamma_h [H] of --decay (one value, H values, or retnet's
 * 1 - 2^(-5-h)), allocated; NULL without --decay. LA_ERR_ARG naming --decay when the list has
 * neither 1 nor H values. */
la_status la_eval_decay_log(const la_cli *o, int H, double **lg);

#endif
