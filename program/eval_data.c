/* `linattn eval`'s data for one (n, input scale) (docs/design.md §8, §8.7): this rank's rows of
 * the inputs, and everything that depends on them and not on the map: the exact softmax
 * references per mode, the rank-r floor and its singular vectors, the kernel rows, the rows
 * of rows.csv, the kernel-bias entries, and weights_tv_floor per r. la_cmd_eval (eval.c)
 * reads them once per n and prepares them once per input scale; run_width reads them. Every
 * step's status is agreed across ranks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "eval.h"
#include "floor.h"
#include "job.h"
#include "la_alloc.h"
#include "linattn/baseline.h"
#include "linattn/study.h"
#include "linattn/dist.h"

void la_eval_data_free(la_eval_data *x) {
  free(x->q), free(x->k), free(x->v), free(x->g), free(x->kall), free(x->qall);
  free(x->kall_rows), free(x->kq_all), free(x->fu), free(x->fv);
  for (int m = 0; m < 2; m++)
    for (int t = 0; t < 4; t++) free(x->sm[m][t]);
  free(x->krows), free(x->kq), free(x->srows), free(x->sq), free(x->sv);
  free(x->erows), free(x->ekeys), free(x->eq), free(x->ek), free(x->lg);
  memset(x, 0, sizeof *x);
}

la_status la_eval_decay_log(const la_cli *o, int H, double **lg) {
  *lg = NULL;
  if (!o->cfg.decay_retnet && o->cfg.decay_n == 0) return LA_OK;
  LA_CHECK(o->cfg.decay_retnet || o->cfg.decay_n == 1 || o->cfg.decay_n == H, LA_ERR_ARG,
           "--decay: %d values for %d heads (give one, or one per head)", o->cfg.decay_n, H);
  *lg = la_eval_dalloc(H);
  LA_CHECK(*lg, LA_ERR_NOMEM, "eval: out of memory");
  for (int h = 0; h < H; h++) /* RetNet: gamma_h = 1 - 2^(-5-h) (docs/design.md §1.2) */
    (*lg)[h] = o->cfg.decay_retnet ? log1p(-ldexp(1.0, -5 - h))
                                   : log(o->cfg.decay[o->cfg.decay_n == 1 ? 0 : h]);
  return LA_OK;
}

int la_eval_threads(int T) {
  la_config c;
  la_config_default(&c);
  c.threads = T;
  return la_config_threads(&c);
}

double *la_eval_dalloc(int64_t n) { return la_malloc(sizeof(double) * (size_t)(n > 0 ? n : 1)); }

static la_status allgather_rows(la_dist d, const double *mine, int64_t nloc, int64_t width,
                                int64_t n, double *all) {
  const int P = la_dist_size(d);
  int *cnt = la_malloc(sizeof(int) * (size_t)P), *dsp = la_malloc(sizeof(int) * (size_t)P);
  la_status st = cnt && dsp ? LA_OK : la_error(LA_ERR_NOMEM, "eval: out of memory");
  st = la_dist_agree(d, st); /* before the collective: a failure here is one rank's */
  if (st == LA_OK && n * width > INT32_MAX)
    st = la_error(LA_ERR_UNSUPPORTED, "eval: %lld x %lld values exceed an MPI count",
                  (long long)n, (long long)width);
  if (st == LA_OK) {
    for (int p = 0; p < P; p++) {
      int64_t np, p0;
      la_split_ownership(n, P, p, &np, &p0);
      cnt[p] = (int)(np * width), dsp[p] = (int)(p0 * width);
    }
    if (MPI_Allgatherv(mine, (int)(nloc * width), MPI_DOUBLE, all, cnt, dsp, MPI_DOUBLE,
                       la_dist_comm(d)) != MPI_SUCCESS)
      st = la_error(LA_ERR_MPI, "eval: MPI_Allgatherv failed");
  }
  free(cnt), free(dsp);
  return st;
}

/* The rows of idx[0..m) that this rank owns, and copies of their rows of x (width w). */
static la_status own_rows(const la_eval_data *x, const int64_t *idx, int64_t m, const double *src,
                          int64_t w, int64_t *cnt, int64_t **rows, double **copy) {
  int64_t c = 0;
  for (int64_t a = 0; a < m; a++) c += idx[a] >= x->row0 && idx[a] < x->row0 + x->nloc;
  *rows = la_malloc(sizeof(int64_t) * (size_t)(c + 1));
  *copy = la_eval_dalloc(c * w);
  if (!*rows || !*copy) return la_error(LA_ERR_NOMEM, "eval: out of memory for %lld rows", (long long)c);
  c = 0;
  for (int64_t a = 0; a < m; a++)
    if (idx[a] >= x->row0 && idx[a] < x->row0 + x->nloc) {
      (*rows)[c] = idx[a];
      memcpy(*copy + c * w, src + (idx[a] - x->row0) * w, sizeof(double) * (size_t)w);
      c++;
    }
  *cnt = c;
  return LA_OK;
}

/* Inputs of length n (the files, or the generator at n), this rank's rows in float64. */
la_status la_eval_data_read(la_dist d, const la_cli *o, int64_t n, la_eval_data *x) {
  la_cli o2 = *o;
  o2.sub = LA_SUB_GRAD;
  o2.n = n;
  o2.cfg.seed = (uint64_t)o->data_seed;
  o2.cfg.mode = LA_CAUSAL;
  o2.cfg.map = LA_MAP_ELU1;
  o2.cfg.window = 0;
  o2.dtype = LA_F64;
  o2.dtype_set = 1;
  o2.input_scale = 1;
  o2.segments = NULL, o2.projection = NULL, o2.save_projection = NULL;
  o2.progress = 0;
  la_job job;
  la_status st = la_job_setup(&job, d, &o2, 1);
  if (st == LA_OK) {
    x->n = job.N, x->H = job.H, x->dk = job.dk, x->dv = job.dv;
    la_split_ownership(x->n, la_dist_size(d), la_dist_rank(d), &x->nloc, &x->row0);
    const int64_t rq = x->nloc * x->H;
    x->q = la_eval_dalloc(rq * x->dk), x->k = la_eval_dalloc(rq * x->dk);
    /* G only for the gradient columns, up to --softmax-max-n (§8.7) */
    const int nt = x->n <= o->softmax_max_n ? 4 : 3;
    x->v = la_eval_dalloc(rq * x->dv), x->g = nt == 4 ? la_eval_dalloc(rq * x->dv) : NULL;
    double *b[4] = {x->q, x->k, x->v, x->g};
    if (!x->q || !x->k || !x->v || (nt == 4 && !x->g)) {
      st = la_error(LA_ERR_NOMEM, "out of memory for this rank's %lld rows", (long long)x->nloc);
    }
    for (int t = 0; t < nt && st == LA_OK && x->nloc > 0; t++)
      st = la_job_read(&job, t, x->row0, x->nloc, b[t]);
    st = la_dist_agree(d, st);
  }
  la_job_close(&job);
  /* --decay: its gammas per head, for the references (§8.1 "With decay"); the sampled rows'
   * softmax of §8.7 has no decay, so that combination is refused */
  if (st == LA_OK) st = la_eval_decay_log(o, x->H, &x->lg);
  if (st == LA_OK && x->lg && x->n > o->softmax_max_n)
    st = la_error(LA_ERR_ARG, "--decay: n = %lld is above --softmax-max-n %lld, where the output "
                  "error is over sampled rows against an undecayed softmax; eval takes --decay up "
                  "to --softmax-max-n (raise it, or lower --n)", (long long)x->n,
                  (long long)o->softmax_max_n);
  return la_dist_agree(d, st);
}

/* Everything that depends on (data, n, input scale) and not on the map: the references. */
la_status la_eval_data_prepare(la_dist d, const la_cli *o, la_eval_data *x, double a, la_csv *refs,
                              double *base[2]) {
  const int rank = la_dist_rank(d), P = la_dist_size(d), T = o->cfg.threads;
  const int64_t n = x->n, rq = x->nloc * x->H, H = x->H, dk = x->dk, dv = x->dv;
  la_status st = LA_OK;
  for (int64_t i = 0; i < rq * dk; i++) x->q[i] = a * base[0][i], x->k[i] = a * base[1][i];
  x->s = o->cfg.scale > 0 ? o->cfg.scale : 1 / sqrt((double)dk);
  x->sampled = n > o->softmax_max_n;
  /* every key and query on every rank: only for the floor (n <= --floor-max-n) */
  const int floor_on = n <= o->floor_max_n;
  if (floor_on) x->kall = la_eval_dalloc(n * H * dk), x->qall = la_eval_dalloc(n * H * dk), x->sv = la_eval_dalloc(n * H);
  if (floor_on && (!x->kall || !x->qall || !x->sv))
    st = la_error(LA_ERR_NOMEM, "eval: out of memory for every key and query of n = %lld "
                                "(%lld bytes per rank)", (long long)n,
                  (long long)(8 * n * H * (2 * dk + 1)));
  st = la_dist_agree(d, st);
  if (st == LA_OK && floor_on) st = allgather_rows(d, x->k, x->nloc, H * dk, n, x->kall);
  if (st == LA_OK && floor_on) st = allgather_rows(d, x->q, x->nloc, H * dk, n, x->qall);
  st = la_dist_agree(d, st);
  /* the floor, with the leading singular vectors up to the largest width r < n of the sweep
   * (weights_tv_floor, §8.2) */
  double fsecs = NAN;
  if (st == LA_OK && floor_on) {
    x->rvec = 0;
    for (int mp = 0; mp < o->maps.n; mp++) {
      const la_map_kind map = (la_map_kind)o->maps.i[mp];
      for (int w = 0; w < (la_map_uses_features(map) ? o->features_list.n : 1); w++) {
        const int rw = la_map_width(map, (int)dk, la_map_uses_features(map) ? (int)o->features_list.i[w] : 0);
        if (rw < n && rw > x->rvec) x->rvec = rw;
      }
    }
    if (n > o->tv_floor_max_n || (x->rvec > 0 && H * n * x->rvec > INT32_MAX))
      x->rvec = 0; /* above --tv-floor-max-n, or beyond an MPI count: no weights_tv_floor */
    if (x->rvec > 0) {
      x->fu = la_eval_dalloc(H * n * x->rvec), x->fv = la_eval_dalloc(H * n * x->rvec);
      if (!x->fu || !x->fv)
        st = la_error(LA_ERR_NOMEM, "eval: out of memory for the floor's singular vectors (%lld "
                      "bytes per rank)", (long long)(16 * H * n * x->rvec));
    }
    x->tvf = x->rvec > 0, x->ntvc = 0;
    st = la_dist_agree(d, st);
  }
  if (st == LA_OK && floor_on) {
    double shift, t0 = MPI_Wtime();
    st = la_floor_svd(d, n, (int)H, (int)dk, x->s, x->qall, x->kall, x->rvec, x->sv, x->fu, x->fv,
                      &shift);
    fsecs = MPI_Wtime() - t0;
    x->t_floor += fsecs;
  }
  /* the softmax references, per mode */
  char fsec_s[32];
  snprintf(fsec_s, sizeof fsec_s, "%.6g", fsecs);
  for (int m = 0; m < x->nm && st == LA_OK && x->sampled; m++)
    if (rank == 0) /* no all-rows reference: the kernel pass gives softmax on the kernel rows */
      fprintf(refs->f, "%lld,%lld,%lld,%lld,%.6g,%s,%d,%d,,,%s\n", (long long)n, (long long)H,
              (long long)dk, (long long)dv, a, x->modes[m] == LA_CAUSAL ? "causal" : "bidirectional",
              P, la_eval_threads(T), floor_on ? fsec_s : "");
  for (int m = 0; m < x->nm && st == LA_OK && !x->sampled; m++) {
    const int64_t w[4] = {dv, dk, dk, dv};
    for (int t = 0; t < 4; t++)
      if (!(x->sm[m][t] = la_eval_dalloc(rq * w[t])))
        st = la_error(LA_ERR_NOMEM, "eval: out of memory for the softmax references of n = %lld "
                      "(%lld rows per rank)", (long long)n, (long long)x->nloc);
    st = la_dist_agree(d, st);
    if (st != LA_OK) break;
    la_softmax_mask mask = {x->modes[m], NULL, 0, 0, x->lg}; /* with --decay, decayed (§8.1) */
    double t0 = MPI_Wtime();
    st = la_softmax_ring_grad(d, n, (int)H, (int)dk, (int)dv, x->s, &mask, x->nloc, x->row0,
                              x->q, x->k, x->v, x->g, x->sm[m][0], x->sm[m][1], x->sm[m][2],
                              x->sm[m][3], T);
    double secs = MPI_Wtime() - t0;
    x->t_refs += secs;
    if (st != LA_OK) {
      la_error_prefix(st, "softmax reference (n = %lld, input scale %g, %s): ", (long long)n, a,
                      m ? "bidirectional" : "causal");
      break;
    }
    double loc[4], glob[4];
    for (int t = 0; t < 4; t++) {
      loc[t] = 0;
      for (int64_t i = 0; i < rq * w[t]; i++) loc[t] += x->sm[m][t][i] * x->sm[m][t][i];
    }
    MPI_Allreduce(loc, glob, 4, MPI_DOUBLE, MPI_SUM, la_dist_comm(d));
    MPI_Allreduce(MPI_IN_PLACE, &secs, 1, MPI_DOUBLE, MPI_MAX, la_dist_comm(d));
    for (int t = 0; t < 4; t++) x->sm_norm2[m][t] = glob[t];
    /* useful flops: forward 4 n^2 H dk (half causal), backward 2.5x that */
    const double fl = 3.5 * 4.0 * (double)n * n * H * dk * (x->modes[m] == LA_CAUSAL ? 0.5 : 1);
    if (rank == 0)
      fprintf(refs->f, "%lld,%lld,%lld,%lld,%.6g,%s,%d,%d,%.6g,%.6g,", (long long)n,
              (long long)H, (long long)dk, (long long)dv, a,
              x->modes[m] == LA_CAUSAL ? "causal" : "bidirectional", P,
              la_eval_threads(T), secs, fl / secs * 1e-9);
    if (rank == 0 && floor_on) fprintf(refs->f, "%.6g", fsecs);
    if (rank == 0) fputs("\n", refs->f);
  }
  /* kernel rows, rows.csv sample, bias entries */
  if (st == LA_OK) {
    const int64_t want = n <= o->kernel_max_n ? n : o->kernel_rows;
    const int64_t cap = (n < want ? n : want) > 64 ? (n < want ? n : want) : 64;
    int64_t *idx = la_malloc(sizeof(int64_t) * (size_t)cap);
    if (!idx) st = la_error(LA_ERR_NOMEM, "eval: out of memory for %lld kernel rows", (long long)cap);
    if (st == LA_OK) {
      x->kernel_rows = la_even_rows(n, want, idx);
      st = own_rows(x, idx, x->kernel_rows, x->q, H * dk, &x->nkr, &x->krows, &x->kq);
    }
    if (st == LA_OK) { /* every kernel row and its query, on every rank (an allreduce of the owners') */
      x->kall_rows = la_malloc(sizeof(int64_t) * (size_t)x->kernel_rows);
      x->kq_all = la_calloc((size_t)x->kernel_rows * H * dk, sizeof(double));
      if (!x->kall_rows || !x->kq_all) st = la_error(LA_ERR_NOMEM, "eval: out of memory for the kernel rows");
    }
    if (st == LA_OK) {
      memcpy(x->kall_rows, idx, sizeof(int64_t) * (size_t)x->kernel_rows);
      x->kr_off = 0;
      while (x->kr_off < x->kernel_rows && idx[x->kr_off] < x->row0) x->kr_off++;
      for (int64_t b = 0; b < x->nkr; b++)
        memcpy(x->kq_all + (x->kr_off + b) * H * dk, x->kq + b * H * dk, sizeof(double) * H * dk);
    }
    st = la_dist_agree(d, st);
    if (st == LA_OK && x->kernel_rows * H * dk > INT32_MAX)
      st = la_error(LA_ERR_UNSUPPORTED, "eval: %lld kernel rows exceed an MPI count (lower "
                    "--kernel-rows or --kernel-max-n)", (long long)x->kernel_rows);
    if (st == LA_OK && MPI_Allreduce(MPI_IN_PLACE, x->kq_all, (int)(x->kernel_rows * H * dk),
                                     MPI_DOUBLE, MPI_SUM, la_dist_comm(d)) != MPI_SUCCESS)
      st = la_error(LA_ERR_MPI, "eval: MPI_Allreduce failed");
    if (st == LA_OK) {
      /* rows.csv: 64 evenly spaced of the kernel rows, whose denominators the kernel pass
       * gives (la_shard_pass' map_den with aq and c) */
      int64_t pos[SAMPLE_ROWS], rs[SAMPLE_ROWS];
      const int64_t m = la_even_rows(x->kernel_rows, SAMPLE_ROWS, pos);
      for (int64_t b = 0; b < m; b++) rs[b] = idx[pos[b]];
      st = own_rows(x, rs, m, x->q, H * dk, &x->nsr, &x->srows, &x->sq);
    }
    if (st == LA_OK) {
      int64_t m = la_even_rows(n, BIAS_SIDE, idx);
      st = own_rows(x, idx, m, x->q, H * dk, &x->ner, &x->erows, &x->eq);
      x->ekeys = la_malloc(sizeof(int64_t) * BIAS_SIDE), x->ek = la_calloc(BIAS_SIDE * H * dk, sizeof(double));
      if (st == LA_OK && (!x->ekeys || !x->ek))
        st = la_error(LA_ERR_NOMEM, "eval: out of memory for the %d keys of the bias entries", BIAS_SIDE);
      if (st == LA_OK) { /* the 64 keys, from their owners */
        x->nek = la_even_rows(n, BIAS_SIDE, x->ekeys);
        for (int64_t b = 0; b < x->nek; b++)
          if (x->ekeys[b] >= x->row0 && x->ekeys[b] < x->row0 + x->nloc)
            memcpy(x->ek + b * H * dk, x->k + (x->ekeys[b] - x->row0) * H * dk, sizeof(double) * H * dk);
      }
    }
    free(idx);
    st = la_dist_agree(d, st);
    if (st == LA_OK && MPI_Allreduce(MPI_IN_PLACE, x->ek, (int)(x->nek * H * dk), MPI_DOUBLE,
                                     MPI_SUM, la_dist_comm(d)) != MPI_SUCCESS)
      st = la_error(LA_ERR_MPI, "eval: MPI_Allreduce failed");
  }
  /* the exact kernel on the bias entries: shift = the largest s q.k over them */
  if (st == LA_OK) {
    double c = -INFINITY, r2 = 0;
    for (int pass = 0; pass < 2; pass++) {
      for (int64_t i = 0; i < x->ner; i++)
        for (int64_t j = 0; j < x->nek; j++)
          for (int64_t h = 0; h < H; h++) {
            double e = 0;
            for (int64_t c2 = 0; c2 < dk; c2++) e += x->eq[(i * H + h) * dk + c2] * x->ek[(j * H + h) * dk + c2];
            e *= x->s;
            if (pass == 0) c = e > c ? e : c;
            else r2 += exp(2 * (e - c));
          }
      if (pass == 0) MPI_Allreduce(MPI_IN_PLACE, &c, 1, MPI_DOUBLE, MPI_MAX, la_dist_comm(d));
    }
    MPI_Allreduce(MPI_IN_PLACE, &r2, 1, MPI_DOUBLE, MPI_SUM, la_dist_comm(d));
    x->eshift = c, x->eref2 = r2;
  }
  return la_dist_agree(d, st);
}

/* ---- weights_tv_floor (§8.2), once per r: this rank's kernel rows, summed over ranks ---- */

la_status la_eval_tv_floor_get(la_dist d, la_eval_data *x, int r, int threads) {
  for (int i = 0; i < x->ntvc; i++)
    if (x->tvc_r[i] == r) return LA_OK;
  if (x->ntvc == 64) return LA_OK; /* more widths than the cache: the rest stay empty */
  double sum[2] = {0, 0};
  la_status st = la_lowrank_tv(x->n, x->H, x->dk, x->s, x->kall, x->nkr, x->krows, x->kq, x->rvec,
                               x->fu, x->fv, r, x->nm, x->modes, sum, threads);
  st = la_dist_agree(d, st);
  if (st == LA_OK && MPI_Allreduce(MPI_IN_PLACE, sum, 2, MPI_DOUBLE, MPI_SUM, la_dist_comm(d)) != MPI_SUCCESS)
    st = la_error(LA_ERR_MPI, "eval: MPI_Allreduce failed");
  if (st == LA_OK) {
    x->tvc_r[x->ntvc] = r;
    for (int mi = 0; mi < x->nm; mi++) x->tvc_v[x->ntvc][mi] = sum[mi] / (double)(x->kernel_rows * x->H);
    x->ntvc++;
  }
  return st;
}

/* Not Collective: the value la_eval_tv_floor_get computed, or NaN. */
double la_eval_tv_floor_of(const la_eval_data *x, int r, int mi) {
  for (int i = 0; i < x->ntvc; i++)
    if (x->tvc_r[i] == r) return x->tvc_v[i][mi];
  return NAN;
}

