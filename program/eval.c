/* `linattn eval`: how far each feature map is from exact softmax attention
 * (docs/design.md §8, docs/cli.md "linattn eval"). For each (n, input scale):
 *   inputs (files or the generator) -> the exact float64 references, once per mode (softmax
 *   forward and backward, key/value blocks rotating in a ring) and the rank-r floor (pdgesvd)
 *   -> for each map, width and seed: the engine's forward and backward in float64 on the
 *   sharded rows, the quadratic form of the same map on the kernel rows, the kernel error,
 *   the denominators -> one row of results.csv per mode; then, over the seeds, bias.csv.
 * Every step's status is agreed across ranks; rank 0 writes the CSVs atomically after every
 * (map, width) so that a stopped sweep keeps the rows it finished. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include "eval.h"
#include "eval_report.h"
#include "floor.h"
#include "job.h"
#include "la_alloc.h"
#include "linattn/baseline.h"
#include "linattn/study.h"
#include "run.h"
#include "linattn/dist.h"
#include "sysinfo.h"

/* Where the sweep's wall time goes (rank 0's clock), for the closing line. */
static struct {
  double refs, floor, kernel, engine, recall;
} ev_clock;


int64_t la_even_rows(int64_t n, int64_t m, int64_t *idx) {
  if (m >= n) {
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    return n;
  }
  for (int64_t a = 0; a < m; a++) idx[a] = (int64_t)(((2 * (__int128)a + 1) * n) / (2 * m));
  return m;
}

/* ---- the output folder and its CSVs ---- */

static la_status out_dir_prepare(la_dist d, const char *dir, int force) {
  la_status st = LA_OK;
  if (la_dist_rank(d) == 0) {
    struct stat sb;
    if (stat(dir, &sb) != 0) {
      if (mkdir(dir, 0777) != 0) {
        st = la_error(la_write_status(errno), "--out-dir %s: cannot create it: %s", dir, strerror(errno));
      }
    } else if (!S_ISDIR(sb.st_mode)) {
      st = la_error(LA_ERR_IO, "--out-dir %s: exists and is not a folder", dir);
    } else if (!force) {
      DIR *dp = opendir(dir);
      struct dirent *e;
      int used = 0;
      while (dp && (e = readdir(dp)))
        used |= strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
      if (dp) closedir(dp);
      if (!dp) {
        st = la_error(LA_ERR_IO, "--out-dir %s: cannot read it: %s", dir, strerror(errno));
      } else if (used) {
        st = la_error(LA_ERR_EXISTS, "--out-dir %s: exists and is not empty (use --force to write "
                      "into it)", dir);
      }
    }
    if (st == LA_OK) { /* writable: create and remove a probe */
      char p[4200];
      snprintf(p, sizeof p, "%s/results.csv", dir);
      st = la_output_check(p, 1);
    }
  }
  return la_dist_agree(d, st);
}

static la_status csv_open(la_csv *c, const char *name, const char *header, int rank) {
  memset(c, 0, sizeof *c);
  c->name = name;
  if (rank != 0) return LA_OK;
  c->f = la_open_memstream(&c->buf, &c->len);
  if (!c->f) return la_error(LA_ERR_NOMEM, "out of memory for %s", name);
  fputs(header, c->f);
  return LA_OK;
}

/* Rank 0: write the CSV's text so far to DIR/name, atomically. */
static la_status csv_flush(const la_csv *c, const char *dir) {
  if (!c->f) return LA_OK;
  /* the stream's error flag: an earlier row that could not grow the text (la_alloc.h) */
  if (fflush(c->f) != 0 || ferror(c->f)) return la_error(LA_ERR_NOMEM, "out of memory for %s", c->name);
  char p[4200];
  snprintf(p, sizeof p, "%s/%s", dir, c->name);
  return la_write_file(p, c->buf, c->len, NULL, 0, 1);
}

static void csv_close(la_csv *c) {
  if (c->f) fclose(c->f);
  free(c->buf);
  memset(c, 0, sizeof *c);
}

/* ---- one (map, width): every seed and mode ---- */

typedef struct {
  double t0, last, done, total; /* progress, in units of n (r + dk) */
  int64_t rows_done;
} ev_progress;

static const char *mode_name(la_mode m) { return m == LA_CAUSAL ? "causal" : "bidirectional"; }

/* Gram matrix A_st = <Y_s, Y_t> over ranks of S vectors of len values each. */
static la_status gram(la_dist d, const double *Y, int S, int64_t len, double *A) {
  for (int s = 0; s < S; s++)
    for (int t = 0; t <= s; t++) {
      double acc = 0;
      for (int64_t i = 0; i < len; i++) acc += Y[s * len + i] * Y[t * len + i];
      A[s * S + t] = A[t * S + s] = acc;
    }
  return MPI_Allreduce(MPI_IN_PLACE, A, S * S, MPI_DOUBLE, MPI_SUM, la_dist_comm(d)) == MPI_SUCCESS
             ? LA_OK : la_error(LA_ERR_MPI, "eval: MPI_Allreduce failed");
}

/* khat - E on the bias entries, shifted by e^{-eshift}, into y [ner, nek, H]; under[0] +=
 * the weight E^2 of the entries where khat < E, under[1] += the weight of all of them. */
static la_status kernel_entries(const la_eval_data *x, const la_featmap fm, double *y, double *under) {
  const int r = la_featmap_width(fm), H = x->H, dk = x->dk;
  double *pq = la_eval_dalloc(x->ner * r), *pk = la_eval_dalloc(x->nek * r), *aq = la_eval_dalloc(x->ner),
         *ak = la_eval_dalloc(x->nek);
  la_status st = pq && pk && aq && ak ? LA_OK : la_error(LA_ERR_NOMEM, "eval: out of memory");
  for (int h = 0; h < H && st == LA_OK; h++) {
    if (x->ner) st = la_featmap_eval(fm, LA_F64, h, x->ner, x->eq + h * dk, (int64_t)H * dk, pq, aq);
    if (st == LA_OK) st = la_featmap_eval(fm, LA_F64, h, x->nek, x->ek + h * dk, (int64_t)H * dk, pk, ak);
    for (int64_t i = 0; i < x->ner && st == LA_OK; i++)
      for (int64_t j = 0; j < x->nek; j++) {
        double g = 0, e = 0;
        for (int c = 0; c < r; c++) g += pq[i * r + c] * pk[j * r + c];
        for (int c = 0; c < dk; c++) e += x->eq[(i * H + h) * dk + c] * x->ek[(j * H + h) * dk + c];
        const double ex = exp(x->s * e - x->eshift), yv = g * exp(aq[i] + ak[j] - x->eshift) - ex;
        y[(i * x->nek + j) * H + h] = yv;
        under[0] += yv < 0 ? ex * ex : 0, under[1] += ex * ex;
      }
  }
  free(pq), free(pk), free(aq), free(ak);
  return st;
}

/* The decay column (results.csv, bias.csv): --decay as given, quoted when it is a list; empty
 * without it. */
static const char *decay_cell(const la_cli *o) {
  static char cell[4200];
  const char *g = o->cfg.decay_retnet ? "retnet" : o->decay_string;
  if (!g || (!o->cfg.decay_retnet && o->cfg.decay_n == 0)) return "";
  snprintf(cell, sizeof cell, strchr(g, ',') ? "\"%s\"" : "%s", g);
  return cell;
}

static la_status run_width(la_dist d, const la_cli *o, la_eval_data *x, la_map_kind map, int m_feat,
                           double a, la_csv *res, la_csv *bias, la_csv *rowsc,
                           ev_progress *pg) {
  const int rank = la_dist_rank(d), random = la_map_is_random(map), S = random ? o->seeds : 1;
  const int sized = la_map_uses_features(map); /* m_feat is m or dpfp's nu */
  const int64_t H = x->H, dk = x->dk, dv = x->dv, rq = x->nloc * H, ne = x->ner * x->nek * H;
  const int bias_on = random && S >= 2, sam = x->sampled;
  /* the output error's rows: all of this rank's, or (sampled) its kernel rows (§8.7) */
  const int64_t ylen = (sam ? x->nkr * H : rq) * dv;
  double *Yout = bias_on ? la_eval_dalloc((int64_t)x->nm * S * ylen) : NULL;
  double *Yk = bias_on ? la_eval_dalloc(S * ne) : NULL;
  double *out = la_eval_dalloc(rq * dv), *gq = NULL, *gk = NULL, *gv = NULL;
  if (!sam) gq = la_eval_dalloc(rq * dk), gk = la_eval_dalloc(rq * dk), gv = la_eval_dalloc(rq * dv);
  double *quad = la_eval_dalloc(x->nm * x->nkr * H * dv), *lden = la_eval_dalloc(x->nm * x->nkr * H);
  double *smo = la_eval_dalloc(x->nm * x->nkr * H * dv); /* softmax on this rank's kernel rows */
  double *pack = la_eval_dalloc(4 * x->nsr * H), *gathered = NULL;
  int *cnt = NULL, *dsp = NULL;
  double smn2[2] = {0, 0}; /* sampled: ||softmax||^2 over the kernel rows, per mode */
  la_status st = (!bias_on || (Yout && Yk)) && out && (sam || (gq && gk && gv)) && quad && lden &&
                         smo && pack ? LA_OK : LA_ERR_NOMEM;
  if (rank == 0) {
    gathered = la_eval_dalloc(4 * SAMPLE_ROWS * H);
    cnt = la_malloc(sizeof(int) * la_dist_size(d)), dsp = la_malloc(sizeof(int) * la_dist_size(d));
    if (!gathered || !cnt || !dsp) st = LA_ERR_NOMEM; /* the reason is recorded below */
  }
  if (st != LA_OK)
    st = la_error(LA_ERR_NOMEM, "eval: out of memory for the outputs of %d seeds (%lld rows per rank)",
                  S, (long long)x->nloc);
  st = la_dist_agree(d, st);
  int r = 0;
  double under[2] = {0, 0}; /* kernel entries: weight below exp(s q.k), and all (§8.3) */
  for (int s = 0; s < S && st == LA_OK; s++) {
    la_config cfg;
    la_config_default(&cfg);
    cfg.map = map, cfg.features = m_feat, cfg.seed = (uint64_t)s, cfg.scale = x->s;
    cfg.den_policy = LA_DEN_ADD, cfg.den_eps = 0; /* the raw ratio: eval measures, it does not fix */
    cfg.threads = o->cfg.threads, cfg.chunk = o->cfg.chunk;
    /* --decay: the map decayed, against softmax with the same decay (§8.1 "With decay") */
    cfg.decay = o->cfg.decay, cfg.decay_n = o->cfg.decay_n, cfg.decay_retnet = o->cfg.decay_retnet;
    la_featmap fm = NULL;
    la_shard_sums ss;
    memset(&ss, 0, sizeof ss);
    st = la_featmap_create(&cfg, (int)H, (int)dk, &fm);
    if (st == LA_OK) r = la_featmap_width(fm);
    const double tk = MPI_Wtime();
    if (st == LA_OK && bias_on) st = kernel_entries(x, fm, Yk + s * ne, under);
    st = la_dist_agree(d, st);
    /* the kernel rows against this rank's keys, combined over ranks (§8.2, §8.7) */
    if (st == LA_OK)
      st = la_eval_kernel_pass(d, fm, x->s, x->row0, x->nloc, x->k, x->v, x->kernel_rows,
                               x->kall_rows, x->kq_all, x->nm, x->modes, (int)dv, cfg.threads, &ss);
    /* with --decay, reassoc_rel_err's reference and rows.csv's denominators are the decayed
     * quadratic form's; the kernel pass' undecayed one is not used */
    double *dq_all = NULL, *dl_all = NULL;
    if (st == LA_OK && x->lg) {
      dq_all = la_eval_dalloc(x->nm * x->kernel_rows * H * dv), dl_all = la_eval_dalloc(x->nm * x->kernel_rows * H);
      st = dq_all && dl_all ? LA_OK : la_error(LA_ERR_NOMEM, "eval: out of memory for the decayed "
                                                "quadratic form");
      st = la_dist_agree(d, st);
      if (st == LA_OK)
        st = la_eval_decay_quad(d, fm, x->lg, x->row0, x->nloc, x->k, x->v, x->kernel_rows,
                                x->kall_rows, x->kq_all, x->nm, x->modes, (int)dv, dq_all, dl_all);
    }
    ev_clock.kernel += MPI_Wtime() - tk;
    const double kerr = st == LA_OK ? sqrt(ss.ks.err2 / ss.ks.ref2) : NAN;
    double tv[2] = {NAN, NAN};
    for (int mi = 0; mi < x->nm && st == LA_OK; mi++) {
      tv[mi] = la_eval_weights_tv(&ss, mi);
      smn2[mi] = 0;
      for (int64_t i = 0; i < x->kernel_rows * H; i++) {
        const int64_t y = mi * x->kernel_rows * H + i;
        for (int64_t c = 0; c < dv; c++) {
          const double o2 = ss.sm_out[y * dv + c] / ss.sm_sum[y];
          smn2[mi] += o2 * o2;
        }
      }
      /* this rank's kernel rows: the quadratic form, its log-denominator, softmax */
      for (int64_t i = 0; i < x->nkr; i++)
        for (int64_t h = 0; h < H; h++) {
          const int64_t y = (mi * x->kernel_rows + x->kr_off + i) * H + h, z = (mi * x->nkr + i) * H + h;
          const double den = ss.map_den[y];
          for (int64_t c = 0; c < dv; c++) {
            quad[z * dv + c] = dq_all ? dq_all[y * dv + c] : ss.map_out[y * dv + c] / den;
            smo[z * dv + c] = ss.sm_out[y * dv + c] / ss.sm_sum[y];
          }
          lden[z] = dl_all ? dl_all[y]
                           : den > 0 ? log(den) + ss.aq[(x->kr_off + i) * H + h] + ss.c[h]
                                     : (den == 0 ? -INFINITY : NAN);
        }
    }
    free(dq_all), free(dl_all);
    la_shard_sums_free(&ss);
    if (st == LA_OK && x->tvf && r < x->n && r <= x->rvec) {
      const double tf = MPI_Wtime();
      st = la_eval_tv_floor_get(d, x, r, cfg.threads);
      ev_clock.floor += MPI_Wtime() - tf;
    }
    for (int mi = 0; mi < x->nm && st == LA_OK; mi++) {
      la_engine eng = NULL;
      la_den_stats ds = {0};
      cfg.mode = x->modes[mi];
      int nograd = sam; /* sampled rows (§8.7): no gradient columns */
      st = la_den_stats_init(&ds);
      if (st == LA_OK) st = la_engine_create(&cfg, fm, LA_F64, (int)dv, &eng);
      /* the outputs come from the backward's replay: one pass fewer than forward + backward */
      if (st == LA_OK && !nograd) st = la_engine_set_replay_output(eng, out, x->row0, x->nloc);
      st = la_dist_agree(d, st);
      double t0 = MPI_Wtime();
      if (st == LA_OK && !nograd) {
        st = la_dist_backward(d, eng, x->nloc, x->row0, x->q, x->k, x->v, x->g, gq, gk, gv, &ds);
        /* a decayed backward the engine refuses (§1.2: LA_ERR_UNSUPPORTED with the reason, e.g.
         * for a stabilized map): the forward alone on a fresh engine, the gradient cells empty
         * (§8.1 "With decay"); the status is agreed, so every rank takes this branch */
        if (st == LA_ERR_UNSUPPORTED && la_engine_decayed(eng)) {
          nograd = 1;
          la_engine_destroy(&eng);
          la_den_stats_free(&ds);
          la_error_clear();
          st = la_den_stats_init(&ds);
          if (st == LA_OK) st = la_engine_create(&cfg, fm, LA_F64, (int)dv, &eng);
          st = la_dist_agree(d, st);
        }
        if (nograd && st == LA_OK)
          st = la_dist_forward(d, eng, x->nloc, x->row0, x->q, x->k, x->v, out, &ds);
      } else if (st == LA_OK) { /* the forward alone */
        st = la_dist_forward(d, eng, x->nloc, x->row0, x->q, x->k, x->v, out, &ds);
      }
      double secs = MPI_Wtime() - t0;
      ev_clock.engine += secs;
      la_engine_destroy(&eng);
      if (st != LA_OK) {
        la_error_prefix(st, "%s m=%d seed %d, n = %lld, %s: ", la_map_name(map), m_feat, s,
                        (long long)x->n, mode_name(cfg.mode));
        la_den_stats_free(&ds);
        break;
      }
      /* errors against softmax and against the quadratic form of the same map */
      double e[8] = {0};
      const double *ref[4] = {x->sm[mi][0], x->sm[mi][1], x->sm[mi][2], x->sm[mi][3]};
      const double *got[4] = {out, gq, gk, gv};
      const int64_t w[4] = {dv, dk, dk, dv};
      const double *sd = smo + (size_t)mi * x->nkr * H * dv;
      for (int t = 0; t < (nograd ? 1 : 4) && !sam; t++)
        for (int64_t i = 0; i < rq * w[t]; i++) {
          const double df = got[t][i] - ref[t][i];
          e[t] += df * df;
        }
      for (int64_t i = 0; i < x->nkr && sam; i++) /* sampled: the kernel rows only */
        for (int64_t c = 0; c < H * dv; c++) {
          const double df = out[(x->krows[i] - x->row0) * H * dv + c] - sd[i * H * dv + c];
          e[0] += df * df;
        }
      const double *qd = quad + (size_t)mi * x->nkr * H * dv;
      for (int64_t i = 0; i < x->nkr; i++)
        for (int64_t c = 0; c < H * dv; c++) {
          const double o1 = out[(x->krows[i] - x->row0) * H * dv + c], o2 = qd[i * H * dv + c];
          e[4] += (o1 - o2) * (o1 - o2), e[5] += o2 * o2;
        }
      e[6] = secs;
      MPI_Allreduce(MPI_IN_PLACE, e, 6, MPI_DOUBLE, MPI_SUM, la_dist_comm(d));
      MPI_Allreduce(MPI_IN_PLACE, &e[6], 1, MPI_DOUBLE, MPI_MAX, la_dist_comm(d));
      if (bias_on) {
        double *y = Yout + ((int64_t)mi * S + s) * ylen;
        if (!sam)
          for (int64_t i = 0; i < rq * dv; i++) y[i] = out[i] - ref[0][i];
        for (int64_t i = 0; i < x->nkr && sam; i++)
          for (int64_t c = 0; c < H * dv; c++)
            y[i * H * dv + c] = out[(x->krows[i] - x->row0) * H * dv + c] - sd[i * H * dv + c];
      }
      /* rows.csv: the sampled rows' denominators (quadratic form) and errors */
      for (int64_t i = 0, ki = 0; i < x->nsr; i++)
        for (int64_t h = 0; h < H; h++) {
          while (x->krows[ki] < x->srows[i]) ki++; /* the sample is a subset of the kernel rows */
          const double *oi = out + ((x->srows[i] - x->row0) * H + h) * dv;
          /* softmax from the kernel pass; with --decay the decayed reference's row */
          const double *si = x->lg ? x->sm[mi][0] + ((x->srows[i] - x->row0) * H + h) * dv
                                   : sd + (ki * H + h) * dv;
          double num = 0, den = 0;
          for (int64_t c = 0; c < dv; c++) num += (oi[c] - si[c]) * (oi[c] - si[c]), den += si[c] * si[c];
          double *p = pack + 4 * (i * H + h);
          p[0] = (double)x->srows[i], p[1] = (double)h;
          p[2] = lden[((size_t)mi * x->nkr + ki) * H + h], p[3] = sqrt(num / den);
        }
      int mine = (int)(4 * x->nsr * H);
      MPI_Gather(&mine, 1, MPI_INT, cnt, 1, MPI_INT, 0, la_dist_comm(d));
      if (rank == 0)
        for (int p = 0, off = 0; p < la_dist_size(d); p++) dsp[p] = off, off += cnt[p];
      MPI_Gatherv(pack, mine, MPI_DOUBLE, gathered, cnt, dsp, MPI_DOUBLE, 0, la_dist_comm(d));
      if (rank == 0) {
        const double fl = x->n <= o->floor_max_n ? la_floor_rel_err(x->sv, (int)H, x->n, r) : NAN;
        char flr[32] = "", grads[96] = ",,", tvf[32] = "";
        if (!isnan(fl)) snprintf(flr, sizeof flr, "%.6g", fl);
        if (!nograd)
          snprintf(grads, sizeof grads, "%.6g,%.6g,%.6g", sqrt(e[1] / x->sm_norm2[mi][1]),
                   sqrt(e[2] / x->sm_norm2[mi][2]), sqrt(e[3] / x->sm_norm2[mi][3]));
        if (x->tvf && r < x->n && !isnan(la_eval_tv_floor_of(x, r, mi)))
          snprintf(tvf, sizeof tvf, "%.6g", la_eval_tv_floor_of(x, r, mi));
        fprintf(res->f, "%s,%d,%d,%d,%lld,%lld,%lld,%lld,%.6g,%s,%.6g,%s,%.6g,%.6g,"
                        "%lld,%s,%.6g,%.6g,%.4g,%lld,%.6g,%s,%s\n",
                la_map_name(map), sized ? m_feat : r, r, s, (long long)x->n, (long long)H,
                (long long)dk, (long long)dv, a, mode_name(cfg.mode),
                sqrt(e[0] / (sam ? smn2[mi] : x->sm_norm2[mi][0])), grads,
                sqrt(e[4] / e[5]), kerr, (long long)x->kernel_rows, flr, ds.min,
                ds.rows ? (double)la_den_stats_count_small(&ds) / (double)ds.rows : NAN, e[6],
                (long long)(sam ? x->kernel_rows : x->n), tv[mi], tvf, decay_cell(o));
        /* den_over_median: against the median log-denominator of this sample */
        const int ns = (int)(cnt ? (dsp[la_dist_size(d) - 1] + cnt[la_dist_size(d) - 1]) / 4 : 0);
        double *ld = la_eval_dalloc(ns);
        if (!ld) st = la_error(LA_ERR_NOMEM, "eval: out of memory for the median denominator");
        for (int i = 0; ld && i < ns; i++) ld[i] = gathered[4 * i + 2];
        double med = NAN;
        if (ld && ns > 0) {
          for (int i = 1; i < ns; i++) /* insertion sort: ns <= 64 H */
            for (int j = i; j > 0 && ld[j - 1] > ld[j]; j--) {
              double tmp = ld[j];
              ld[j] = ld[j - 1], ld[j - 1] = tmp;
            }
          med = ld[ns / 2];
        }
        free(ld);
        for (int i = 0; i < ns; i++) {
          const double *p = gathered + 4 * i;
          fprintf(rowsc->f, "%s,%d,%d,%lld,%.6g,%s,%lld,%d,%.6g,%.6g,%.6g\n", la_map_name(map),
                  sized ? m_feat : r, s, (long long)x->n, a, mode_name(cfg.mode),
                  (long long)p[0], (int)p[1], exp(p[2]), exp(p[2] - med), p[3]);
        }
      }
      la_den_stats_free(&ds);
      pg->done += (double)x->n * (r + dk);
      pg->rows_done++;
      if (rank == 0 && o->progress) {
        const double now = MPI_Wtime(), rate = pg->done / fmax(now - pg->t0, 1e-9);
        if (now - pg->last >= 1.0 || pg->done >= pg->total) {
          pg->last = now;
          fprintf(stderr, "linattn: eval %5.1f%%  %lld rows  (%s m=%d seed %d n=%lld %s)  ETA %.0f s\n",
                  100.0 * pg->done / pg->total, (long long)pg->rows_done, la_map_name(map),
                  m_feat, s, (long long)x->n, mode_name(cfg.mode), (pg->total - pg->done) / rate);
        }
      }
    }
    la_featmap_destroy(&fm);
    st = la_dist_agree(d, st);
  }
  /* the bias over seeds, per mode */
  if (st == LA_OK && bias_on) {
    double *A = la_eval_dalloc(S * S), *B = la_eval_dalloc(S * S);
    st = A && B ? LA_OK : la_error(LA_ERR_NOMEM, "eval: out of memory");
    st = la_dist_agree(d, st);
    if (st == LA_OK) st = gram(d, Yk, S, ne, B);
    double km = 0, kn = 0, kp = st == LA_OK ? la_signflip_pvalue(B, S) : NAN;
    if (st == LA_OK) la_gram_mean_noise(B, S, &km, &kn);
    MPI_Allreduce(MPI_IN_PLACE, under, 2, MPI_DOUBLE, MPI_SUM, la_dist_comm(d));
    const double level = 0.05;
    for (int mi = 0; mi < x->nm && st == LA_OK; mi++) {
      st = gram(d, Yout + (int64_t)mi * S * ylen, S, ylen, A);
      double om = 0, on = 0, op = la_signflip_pvalue(A, S);
      la_gram_mean_noise(A, S, &om, &on);
      const double rn = sqrt(sam ? smn2[mi] : x->sm_norm2[mi][0]), kr = sqrt(x->eref2);
      if (rank == 0 && st == LA_OK)
        fprintf(bias->f, "%s,%d,%d,%lld,%.6g,%s,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%lld,"
                         "sign-flip U-statistic,%.2g,%s,%s,%.4g,%s\n",
                la_map_name(map), m_feat, r, (long long)x->n, a, mode_name(x->modes[mi]), S,
                om / rn, on / rn, op, km / kr, kn / kr, kp,
                (long long)((x->n < BIAS_SIDE ? x->n : BIAS_SIDE) * x->nek * H),
                level, op <= level ? "yes" : "no", kp <= level ? "yes" : "no", under[0] / under[1],
                decay_cell(o));
    }
    free(A), free(B);
  }
  free(Yout), free(Yk), free(out), free(gq), free(gk), free(gv), free(quad), free(lden), free(smo);
  free(pack), free(gathered), free(cnt), free(dsp);
  return la_dist_agree(d, st);
}

/* ---- the command ---- */

static const char *const RESULTS_HEADER =
    "feature_map,features,r,seed,n,heads,dk,dv,input_scale,mode,out_rel_err,grad_q_rel_err,"
    "grad_k_rel_err,grad_v_rel_err,reassoc_rel_err,kernel_rel_err,kernel_rows,"
    "rank_r_floor_rel_err,den_min,den_frac_small,seconds,out_rows,weights_tv,weights_tv_floor,"
    "decay\n";
static const char *const BIAS_HEADER =
    "feature_map,features,r,n,input_scale,mode,seeds,out_mean_rel_err,out_noise_rel,"
    "out_p_value,kernel_mean_rel_err,kernel_noise_rel,kernel_p_value,kernel_entries,test,level,"
    "out_bias_detected,kernel_bias_detected,kernel_under_share,decay\n";
static const char *const ROWS_HEADER =
    "feature_map,features,seed,n,input_scale,mode,token,head,den,den_over_median,row_rel_err\n";
static const char *const REFS_HEADER =
    "n,heads,dk,dv,input_scale,mode,ranks,threads,softmax_seconds,softmax_gflops,floor_seconds\n";
static const char *const RECALL_HEADER =
    "feature_map,features,r,pairs,seeds,queries,accuracy,softmax_accuracy\n";

int la_cmd_eval(la_dist d, la_cli *o) {
  const int rank = la_dist_rank(d);
  enum { RES, BIAS, ROWS, REFS, RECALL, NCSV };
  la_csv csv[NCSV];
  memset(csv, 0, sizeof csv);
  const double t_start = MPI_Wtime();
  memset(&ev_clock, 0, sizeof ev_clock);
  la_error_clear();
  la_status st = LA_OK;
  /* every (map, width) is valid before anything is written (dpfp's nu <= 2 dk - 1) */
  for (int mp = 0; mp < o->maps.n && st == LA_OK; mp++) {
    const la_map_kind map = (la_map_kind)o->maps.i[mp];
    for (int w = 0; w < (la_map_uses_features(map) ? o->features_list.n : 1) && st == LA_OK; w++) {
      la_config c;
      la_config_default(&c);
      c.map = map, c.features = (int)o->features_list.i[w], c.normalize = 0;
      if (la_map_uses_features(map) && la_config_check(&c, o->dk) != LA_OK) {
        char why[1024]; /* la_error's arguments must not point into its own record */
        snprintf(why, sizeof why, "%s", la_error_message());
        st = la_error(LA_ERR_ARG, "%s (study dpfp in an eval of its own with its nu values, "
                      "e.g. --feature-maps dpfp --features 1,2,3)", why);
      }
    }
  }
  if (st == LA_OK) st = out_dir_prepare(d, o->out_dir, o->force);
  const char *names[NCSV] = {"results.csv", "bias.csv", "rows.csv", "refs.csv", "recall.csv"};
  const char *heads[NCSV] = {RESULTS_HEADER, BIAS_HEADER, ROWS_HEADER, REFS_HEADER, RECALL_HEADER};
  for (int c = 0; c < NCSV && st == LA_OK; c++) st = csv_open(&csv[c], names[c], heads[c], rank);
  st = la_dist_agree(d, st);
  /* the sweep's size, for progress */
  ev_progress pg = {MPI_Wtime(), 0, 0, 0, 0};
  const int nn = o->q ? 1 : o->n_list.n;
  for (int i = 0; i < nn; i++)
    for (int mp = 0; mp < o->maps.n; mp++) {
      const la_map_kind map = (la_map_kind)o->maps.i[mp];
      const int nw = la_map_uses_features(map) ? o->features_list.n : 1;
      for (int w = 0; w < nw; w++) {
        const double r =
            la_map_width(map, o->dk, la_map_uses_features(map) ? (int)o->features_list.i[w] : 0);
        pg.total += (o->q ? 1.0 : (double)o->n_list.i[i]) * (r + o->dk) * o->modes.n *
                    o->input_scales.n * (la_map_is_random(map) ? o->seeds : 1);
      }
    }
  for (int i = 0; i < nn && st == LA_OK; i++) {
    la_eval_data x;
    memset(&x, 0, sizeof x);
    x.nm = o->modes.n;
    for (int m = 0; m < x.nm; m++) x.modes[m] = (la_mode)o->modes.i[m];
    st = la_eval_data_read(d, o, o->q ? 0 : o->n_list.i[i], &x);
    double *base[2] = {NULL, NULL};
    if (st == LA_OK) { /* keep the unscaled Q and K; x.q, x.k get the scaled copies */
      base[0] = x.q, base[1] = x.k;
      x.q = la_eval_dalloc(x.nloc * x.H * x.dk), x.k = la_eval_dalloc(x.nloc * x.H * x.dk);
      st = x.q && x.k ? LA_OK : la_error(LA_ERR_NOMEM, "eval: out of memory for the scaled rows");
      st = la_dist_agree(d, st);
    }
    if (st == LA_OK && o->q && i == 0) pg.total *= (double)x.n;
    for (int si = 0; si < o->input_scales.n && st == LA_OK; si++) {
      const double a = o->input_scales.x[si];
      la_eval_data y = x; /* the per-scale parts are allocated fresh and freed below */
      y.kall = y.qall = y.kq = y.sq = y.sv = y.eq = y.ek = y.kq_all = y.fu = y.fv = NULL;
      y.krows = y.srows = y.erows = y.ekeys = y.kall_rows = NULL;
      memset(y.sm, 0, sizeof y.sm);
      st = la_eval_data_prepare(d, o, &y, a, &csv[REFS], base);
      for (int mp = 0; mp < o->maps.n && st == LA_OK; mp++) {
        const la_map_kind map = (la_map_kind)o->maps.i[mp];
        const int nw = la_map_uses_features(map) ? o->features_list.n : 1;
        for (int w = 0; w < nw && st == LA_OK; w++) {
          st = run_width(d, o, &y, map, la_map_uses_features(map) ? (int)o->features_list.i[w] : 0,
                         a, &csv[RES], &csv[BIAS], &csv[ROWS], &pg);
          for (int c = 0; c < RECALL && st == LA_OK; c++)
            st = csv_flush(&csv[c], o->out_dir);
          st = la_dist_agree(d, st);
        }
      }
      ev_clock.refs += y.t_refs, ev_clock.floor += y.t_floor;
      /* free what la_eval_data_prepare allocated; q, k, v, g stay for the next scale */
      y.q = y.k = y.v = y.g = y.lg = NULL;
      la_eval_data_free(&y);
    }
    free(base[0]), free(base[1]);
    la_eval_data_free(&x);
  }
  if (st == LA_OK && o->recall) {
    const double tr = MPI_Wtime();
    st = la_eval_recall(d, o, &csv[RECALL]);
    if (st == LA_OK) st = csv_flush(&csv[RECALL], o->out_dir);
    st = la_dist_agree(d, st);
    ev_clock.recall = MPI_Wtime() - tr;
  }
  if (st == LA_OK) {
    for (int c = 0; c < RECALL; c++)
      if (st == LA_OK) st = csv_flush(&csv[c], o->out_dir);
    if (st == LA_OK && rank == 0) {
      char cmd[4096] = "linattn";
      for (int a = 1; a < o->argc; a++) {
        size_t l = strlen(cmd);
        snprintf(cmd + l, sizeof cmd - l, " %s", o->argv[a]);
      }
      la_sysinfo si;
      la_sysinfo_get(&si);
      char cpu[192];
      snprintf(cpu, sizeof cpu, "%s (%s)", si.model, si.isa);
      la_eval_meta meta = {cmd, LA_VERSION_STRING, la_dist_size(d), la_config_threads(&o->cfg),
                           MPI_Wtime() - t_start, cpu, si.blas_core};
      st = la_eval_report(o->out_dir, &meta);
    }
    st = la_dist_agree(d, st);
  }
  for (int c = 0; c < NCSV; c++) csv_close(&csv[c]);
  if (st != LA_OK) {
    if (rank == 0) fprintf(stderr, "linattn: error: %s\n", la_error_reason(st));
    return la_status_exit_code(st);
  }
  if (rank == 0) {
    const double tot = MPI_Wtime() - t_start;
    fprintf(stderr, "linattn: eval: %lld rows in %.1f s (softmax references %.1f s, floor %.1f s, "
                    "kernel passes %.1f s, the maps' engine %.1f s, recall %.1f s, "
                    "the rest %.1f s); see %s/report.md\n",
            (long long)pg.rows_done, tot, ev_clock.refs, ev_clock.floor, ev_clock.kernel,
            ev_clock.engine, ev_clock.recall,
            tot - ev_clock.refs - ev_clock.floor - ev_clock.kernel - ev_clock.engine - ev_clock.recall,
            o->out_dir);
    la_sysinfo si;
    la_sysinfo_get(&si);
    la_sysinfo_warn(&si);
  }
  return 0;
}
