#!/usr/bin/python3
"""Claim 1, correct reassociation: `linattn run` equals the quadratic form of the same map.

For every feature map x mode x dtype (normalized; unnormalized for every map in f64 and a
few in f32), the program's output is compared with reference.quadratic() applied to the
SAME input arrays (upcast to float64) and the projection the program saved. The error is
||out - ref||_F / ||ref||_F; tolerances are 1e-12 (f64) and 1e-5 (f32). Causal cases use
--chunk 1, 7 and 64 and --threads 1 and 2. Also checked: --projection reproduces the output
bitwise, the same --seed draws the same projection, heads draw different projections,
--reproducible is refused (not implemented yet), and the drawn projections have the
distribution docs/design.md §2 names (N(0, I) rows; orthogonal blocks for favor+orf).
Extra stress: inputs whose norm ramps 0.5 -> 3 along the sequence (the causal key stabilizer
must rescale), N = 1, N = 131, N = 3000, 2-D [N, d] inputs, explicit --scale.

Normalized identity and trig get --allow-signed (docs/cli.md requires it for those two only;
precomputed and taylor2, whose kernel 1 + t + t^2/2 is positive, run without it) and data
with den far from 0. taylor2's reference is Based's full form [1, x~, vec(x~ x~^T)/sqrt 2]
(r = 1 + d + d^2; the engine keeps the symmetric half), dpfp's the authors' torch.roll form;
--features is dpfp's nu. taylor2 is also checked row by row in float32 on large-norm inputs,
where t^2/2 dominates and the signed products cancel (taylor2_rows_f32). Each line shows cond = || |A| |V| / |den| ||_F /
||out||_F, the amplification of rounding in the sums; it stays below ~20 for every case.

This script says nothing about closeness to softmax; see check_softmax.py.

--quick (the reruns on the blas and avx2 kernel tables, tests/CMakeLists.txt) keeps every
map x mode x dtype with causal chunks 7 and 64 only, one thread count each, and chunk 7 only
in the input-ramp cases.

Usage: check_forward.py --linattn build/linattn --workdir /tmp/la_fwd [--quick]
"""
import itertools
import os
import zlib

import numpy as np

import common
import reference as ref

TOL = {"f64": 1e-12, "f32": 1e-5}
FEATURES = {"favor+": 16, "favor+orf": 16, "favor-hyp": 16, "trig": 32, "dpfp": 2}   # dpfp: nu


def make_inputs(c):
    """Q, K, V for a case; positive-offset data where a normalized map needs den > 0."""
    rng = np.random.default_rng(zlib.crc32(c["name"].encode()))
    n, h, dk, dv, mp, norm = c["n"], c["h"], c["dk"], c["dv"], c["map"], c["normalize"]
    g = lambda d: rng.standard_normal((n, h, d))
    if mp == "precomputed":           # dk is the feature width r
        q, k = (rng.uniform(0.1, 1.0, (n, h, dk)) for _ in range(2)) if norm else (g(dk), g(dk))
    elif mp == "relu" and norm:       # P(row all <= 0) = 0.16^dk: no zero denominators
        q, k = g(dk) + 1.0, g(dk) + 1.0
    elif mp == "identity" and norm:   # q.k ~ dk +- 2 sqrt(dk/4): den well above 0
        q, k = 0.5 * g(dk) + 1.0, 0.5 * g(dk) + 1.0
    elif mp == "dpfp" and norm:       # mostly positive rows: products of neighbours overlap,
        q, k = g(dk) + 1.0, g(dk) + 1.0   # so no den is 0 (a row can have phi = 0, like relu)
    elif mp == "trig":                # small |q~ - k~|: the cos sums stay positive
        q, k = 0.3 * g(dk), 0.3 * g(dk)
    elif mp in ref.RANDOM_MAPS:
        q, k = 0.7 * g(dk), 0.7 * g(dk)
    else:
        q, k = g(dk), g(dk)
    if c.get("ramp"):                 # norms grow along the sequence: the causal key
        ramp = np.linspace(0.5, c["ramp"], n)[:, None, None]   # stabilizer must rescale
        q, k = ramp * g(dk), ramp * g(dk)
    v = g(dv)
    if c.get("two_d"):
        q, k, v = q[:, 0], k[:, 0], v[:, 0]
    return q, k, v


def cmdline(c, tag, out, extra=()):
    a = ["--q", f"{tag}_q.npy", "--k", f"{tag}_k.npy", "--v", f"{tag}_v.npy", "--out", out,
         "--mode", c["mode"], "--feature-map", c["map"], "--dtype", c["dtype"],
         "--normalize", "on" if c["normalize"] else "off", "--threads", c["threads"]]
    if c.get("chunk"):
        a += ["--chunk", c["chunk"]]
    if c["map"] in ref.RANDOM_MAPS:
        a += ["--features", c["features"], "--seed", c["seed"]]
    if c["map"] == "dpfp":
        a += ["--features", c["features"]]
    if c.get("scale") is not None:
        a += ["--scale", repr(c["scale"])]
    if c["normalize"] and c["map"] in ("identity", "trig"):
        a += ["--allow-signed"]
    return a + list(extra)


def write_inputs(run, c, tag):
    q, k, v = make_inputs(c)
    q = common.save(run.path(f"{tag}_q.npy"), q, c["dtype"])
    k = common.save(run.path(f"{tag}_k.npy"), k, c["dtype"])
    v = common.save(run.path(f"{tag}_v.npy"), v, c["dtype"])
    return q, k, v


def condition(phiq, phik, v, mode, out, den, normalize):
    """|| |A| |V| / |den| ||_F / ||out||_F: how much rounding in the sums is amplified."""
    a = np.abs(ref.kernel_matrix(phiq, phik, mode))
    s = np.matmul(a, np.abs(ref.as3d(v)).transpose(1, 0, 2)).transpose(1, 0, 2)
    if normalize:
        s = s / np.abs(den)[..., None]
    return float(np.linalg.norm(s) / max(np.linalg.norm(out), 1e-300))


def forward_case(run, tally, c):
    tag = "f"
    q, k, v = write_inputs(run, c, tag)
    out_p, proj_p = run.path("f_out.npy"), run.path("f_proj.npy")
    common.rm(out_p, proj_p)
    extra = ["--save-projection", "f_proj.npy"] if c["map"] in ref.RANDOM_MAPS else []
    rc, _, err = run(*cmdline(c, tag, "f_out.npy", extra))
    tol = TOL[c["dtype"]]
    if rc != 0:
        return tally.case(False, c["name"], note=f"exit {rc}: {common.first_error(err)}",
                          cmd=run.last)
    n, dv = q.shape[0], v.shape[-1]
    h = 1 if q.ndim == 2 else q.shape[1]
    out, note = common.load_out(out_p, n, h, dv)
    if out is None:
        return tally.case(False, c["name"], note=note, cmd=run.last)
    omega = np.load(proj_p) if extra else None
    phiq = ref.feature_map(c["map"], q, omega, c.get("scale"), c.get("features"))
    phik = ref.feature_map(c["map"], k, omega, c.get("scale"), c.get("features"))
    try:
        r, den = ref.quadratic(phiq, phik, v, c["mode"], c["normalize"])
    except ref.DenominatorError as e:
        return tally.case(False, c["name"], note=f"TEST DATA: reference den violates: {e}")
    e = ref.rel_err(out, r)
    cond = condition(phiq, phik, v, c["mode"], r, den, c["normalize"])
    note = (note + " " if note else "") + f"cond={cond:.1e}"
    return tally.case(e <= tol, c["name"], e, tol, note, run.last)


def case_list(quick):
    """The case table. Sizes vary with the map so that H, dk, dv all take several values."""
    cases = []
    threads_chunks = list(itertools.product((1, 7, 64), (1, 2)))
    for i, (mp, dtype) in enumerate(itertools.product(ref.MAPS, ("f32", "f64"))):
        size = dict(n=200, h=2 + i % 2, dk=8 + 2 * (i % 5), dv=5 + i % 8)
        base = dict(map=mp, dtype=dtype, normalize=True, features=FEATURES.get(mp),
                    seed=i % 5, **size)
        # quick (the reruns on other kernel tables): chunk 7 (a ragged last chunk) and 64 (the
        # SIMD chunk kernels' size), the thread count alternating
        tc = [(7, 1 + i % 2), (64, 2 - i % 2)] if quick else threads_chunks
        for chunk, thr in tc:
            cases.append(dict(base, mode="causal", chunk=chunk, threads=thr,
                              name=f"{mp}/causal/{dtype}/norm/chunk{chunk}/t{thr}"))
        for thr in ([1 + i % 2] if quick else (1, 2)):
            cases.append(dict(base, mode="bidirectional", threads=thr,
                              name=f"{mp}/bidirectional/{dtype}/norm/t{thr}"))
    # Unnormalized: every map, both modes in f64 (default chunk); a few in f32.
    for i, (mp, mode) in enumerate(itertools.product(ref.MAPS, ("causal", "bidirectional"))):
        cases.append(dict(map=mp, mode=mode, dtype="f64", normalize=False, n=200, h=2 + i % 2,
                          dk=8 + i % 9, dv=5 + i % 8, features=FEATURES.get(mp), seed=i % 5,
                          threads=1 + i % 2, name=f"{mp}/{mode}/f64/unnorm/t{1 + i % 2}"))
    for mp in ("elu1", "identity", "favor+", "trig", "taylor2", "dpfp"):
        cases.append(dict(map=mp, mode="causal", dtype="f32", normalize=False, n=200, h=2,
                          dk=12, dv=6, features=FEATURES.get(mp), seed=1, threads=2, chunk=7,
                          name=f"{mp}/causal/f32/unnorm/chunk7/t2"))
    # Shapes: 2-D inputs, N = 1, N = 131 (not a multiple of any chunk).
    for mp, mode, chunk in (("elu1", "causal", 7), ("favor+", "bidirectional", None),
                            ("favor-hyp", "causal", 64)):
        cases.append(dict(map=mp, mode=mode, dtype="f64", normalize=True, n=150, h=1, dk=10,
                          dv=7, two_d=True, features=FEATURES.get(mp), seed=2, threads=2,
                          chunk=chunk, name=f"{mp}/{mode}/f64/2-D[150,10]"))
    for mp, mode, dtype in (("elu1", "causal", "f32"), ("favor+", "causal", "f64"),
                            ("favor-hyp", "bidirectional", "f64"), ("trig", "causal", "f64"),
                            ("precomputed", "bidirectional", "f32"), ("taylor2", "causal", "f32"),
                            ("dpfp", "bidirectional", "f64")):
        cases.append(dict(map=mp, mode=mode, dtype=dtype, normalize=True, n=1, h=2, dk=8, dv=5,
                          features=FEATURES.get(mp), seed=3, threads=2, chunk=7,
                          name=f"{mp}/{mode}/{dtype}/N=1"))
    for mp in ("elu1", "relu", "favor+", "favor+orf", "favor-hyp", "trig", "precomputed",
               "taylor2", "dpfp"):
        for chunk, dtype in ((7, "f64"), (64, "f64"), (64, "f32")):
            cases.append(dict(map=mp, mode="causal", dtype=dtype, normalize=True, n=131, h=3,
                              dk=9, dv=11, features=FEATURES.get(mp), seed=4, threads=2,
                              chunk=chunk, name=f"{mp}/causal/{dtype}/N=131/chunk{chunk}"))
    # Large, growing exponents (stabilizers active and rescaled), and a longer sequence.
    for mp, norm, dtype, chunk in itertools.product(("favor+", "favor-hyp"), (True, False),
                                                   ("f64", "f32"), (1, 7, 64)):
        if quick and chunk != 7:
            continue
        tag = "norm" if norm else "unnorm"
        cases.append(dict(map=mp, mode="causal", dtype=dtype, normalize=norm, n=300, h=2,
                          dk=16, dv=6, features=32, seed=2, threads=2, chunk=chunk, ramp=3.0,
                          name=f"{mp}/causal/{dtype}/{tag}/input-ramp-0.5..3/chunk{chunk}"))
        if chunk == 7:
            cases.append(dict(cases[-1], mode="bidirectional", chunk=None,
                              name=f"{mp}/bidirectional/{dtype}/{tag}/input-ramp-0.5..3"))
    for mp, dtype in itertools.product(("elu1", "favor+", "trig"), ("f64", "f32")):
        cases.append(dict(map=mp, mode="causal", dtype=dtype, normalize=True, n=3000, h=2, dk=8,
                          dv=8, features=FEATURES.get(mp), seed=0, threads=2, chunk=64,
                          name=f"{mp}/causal/{dtype}/norm/N=3000/chunk64"))
    # dpfp's nu: 1, 3 and the largest, 2 dk - 1 (its block j = dk is identically 0).
    for nu, dtype in ((1, "f64"), (3, "f32"), (15, "f64")):
        for mode in ("causal", "bidirectional"):
            cases.append(dict(map="dpfp", mode=mode, dtype=dtype, normalize=True, n=150, h=2,
                              dk=8, dv=5, features=nu, seed=0, threads=2, chunk=16,
                              name=f"dpfp/{mode}/{dtype}/nu={nu}"))
    # taylor2 at Based's head size (dk = 16: r = 153) and a wider one (dk = 40: r = 861).
    for dk, dtype in ((16, "f64"), (16, "f32"), (40, "f64")):
        cases.append(dict(map="taylor2", mode="causal", dtype=dtype, normalize=True, n=300, h=2,
                          dk=dk, dv=8, seed=0, threads=2, chunk=None,
                          name=f"taylor2/causal/{dtype}/dk={dk}"))
    # Explicit --scale for the random maps and taylor2.
    for mp, s in (("favor+", 0.2), ("favor-hyp", 0.5), ("trig", 0.2), ("favor+orf", 0.05),
                  ("taylor2", 0.6)):
        for mode in ("causal", "bidirectional"):
            cases.append(dict(map=mp, mode=mode, dtype="f64", normalize=True, n=200, h=2, dk=16,
                              dv=8, features=FEATURES.get(mp), seed=1, threads=2, chunk=64, scale=s,
                              name=f"{mp}/{mode}/f64/scale={s}"))
    return cases


def projection_checks(run, tally):
    """--projection reproduces outputs bitwise; seeds and heads behave as docs/design.md §2 says."""
    for mp in ref.RANDOM_MAPS:
        c = dict(map=mp, mode="causal", dtype="f64", normalize=True, n=120, h=3, dk=8, dv=6,
                 features=16, seed=5, threads=2, chunk=7, name=f"proj/{mp}")
        write_inputs(run, c, "p")
        common.rm(*(run.path(f) for f in ("p_a.npy", "p_b.npy", "p_c.npy", "P.npy", "P2.npy",
                                          "P3.npy", "P4.npy")))
        rc1, _, e1 = run(*cmdline(c, "p", "p_a.npy", ["--save-projection", "P.npy"]))
        cmd1 = run.last
        if rc1 != 0:
            tally.case(False, f"{mp}: save-projection run", note=common.first_error(e1),
                       cmd=cmd1)
            continue
        # Load the projection under a different --seed: the file must win.
        rc2, _, e2 = run(*cmdline(dict(c, seed=99), "p", "p_b.npy", ["--projection", "P.npy"]))
        same = rc2 == 0 and np.array_equal(np.load(run.path("p_a.npy")),
                                           np.load(run.path("p_b.npy")))
        tally.case(same, f"{mp}: --projection P reproduces the output bitwise",
                   note="" if rc2 == 0 else f"exit {rc2}: {common.first_error(e2)}", cmd=run.last)
        # Same seed, other mode and thread count: same projection; other seed: different.
        run(*cmdline(dict(c, mode="bidirectional", threads=1), "p", "p_c.npy",
                     ["--save-projection", "P2.npy", "--force"]))
        run(*cmdline(dict(c, seed=6), "p", "p_c.npy", ["--save-projection", "P3.npy", "--force"]))
        p1 = np.load(run.path("P.npy"))
        p2 = np.load(run.path("P2.npy")) if os.path.exists(run.path("P2.npy")) else None
        p3 = np.load(run.path("P3.npy")) if os.path.exists(run.path("P3.npy")) else None
        tally.case(p2 is not None and np.array_equal(p1, p2),
                   f"{mp}: same --seed gives the same projection (other mode, threads)",
                   cmd=run.last)
        tally.case(p3 is not None and p3.shape == p1.shape and not np.array_equal(p1, p3),
                   f"{mp}: a different --seed gives a different projection")
        tally.case(p1.shape == (3, 16, 8), f"{mp}: projection shape [H, m, dk]",
                   note=f"shape {p1.shape}")
        if p1.ndim == 3:
            distinct = all(not np.allclose(p1[a], p1[b]) for a, b in
                           itertools.combinations(range(p1.shape[0]), 2))
            tally.case(distinct, f"{mp}: every head has its own projection")


def distribution_checks(run, tally):
    """Drawn projections: favor+ rows iid N(0, 1) entries; favor+orf blocks of dk orthogonal
    rows with E|omega|^2 = dk. Bounds are 5 sigma, so a correct generator fails ~never."""
    h, m, dk = 2, 512, 16
    c = dict(map="favor+", mode="bidirectional", dtype="f64", normalize=True, n=8, h=h, dk=dk,
             dv=4, features=m, seed=0, threads=1, name="dist")
    write_inputs(run, c, "d")
    for mp in ("favor+", "favor+orf"):
        common.rm(run.path("D.npy"), run.path("d_out.npy"))
        rc, _, e = run(*cmdline(dict(c, map=mp), "d", "d_out.npy", ["--save-projection", "D.npy"]))
        if rc != 0:
            tally.case(False, f"{mp}: projection distribution", note=common.first_error(e),
                       cmd=run.last)
            continue
        om = np.load(run.path("D.npy")).reshape(-1, m, dk)
        x, cnt = om.ravel(), om.size
        sq = np.sum(om ** 2, axis=-1).ravel()   # |omega|^2 ~ chi2(dk): mean dk, var 2 dk
        ok_mean = abs(sq.mean() - dk) < 5 * np.sqrt(2 * dk / sq.size)
        if mp == "favor+":
            ok = abs(x.mean()) < 5 / np.sqrt(cnt) and abs(x.var() - 1) < 5 * np.sqrt(2 / cnt)
            tally.case(ok and ok_mean, f"{mp}: entries look iid N(0,1)",
                       note=f"mean={x.mean():.4f} var={x.var():.4f} E|w|^2={sq.mean():.3f}")
        else:
            worst = 0.0
            for hh in range(om.shape[0]):
                for b0 in range(0, m, dk):
                    blk = om[hh, b0:b0 + dk]
                    u = blk / np.linalg.norm(blk, axis=1, keepdims=True)
                    worst = max(worst, np.abs(u @ u.T - np.eye(len(u))).max())
            tally.case(worst < 1e-10 and ok_mean,
                       f"{mp}: blocks of dk rows orthogonal, E|w|^2 = dk",
                       note=f"max |cos| off-diagonal={worst:.1e} E|w|^2={sq.mean():.3f}")


def reproducible_checks(run, tally):
    """--reproducible on one rank (docs/design.md §4.7; the rank-count matrix is the test
    `reproducible`): 1 and 2 threads give the same bytes, over several grid blocks (chunk 4:
    blocks of 256 tokens), and equal the default mode to float64 rounding."""
    c = dict(map="favor+", mode="causal", dtype="f64", normalize=True, n=700, h=2, dk=4, dv=3,
             features=16, seed=0, threads=1, chunk=4, name="repro")
    write_inputs(run, c, "r")
    outs = {}
    for t, extra in ((1, ["--reproducible"]), (2, ["--reproducible"]), (1, [])):
        name = f"r_out{t}{len(extra)}.npy"
        common.rm(run.path(name))
        rc, _, e = run(*cmdline(dict(c, threads=t), "r", name, extra + ["--force"]))
        outs[(t, len(extra))] = (rc, e, name)
    bad = [f"exit {rc}: {common.first_error(e)}" for rc, e, _ in outs.values() if rc != 0]
    if bad:
        tally.case(False, "--reproducible runs", note="; ".join(bad), cmd=run.last)
        return
    data = {k: open(run.path(v[2]), "rb").read() for k, v in outs.items()}
    tally.case(data[(1, 1)] == data[(2, 1)], "--reproducible: 1 and 2 threads give the same bytes",
               cmd=run.last)
    a, b = np.load(run.path(outs[(1, 1)][2])), np.load(run.path(outs[(1, 0)][2]))
    e = ref.rel_err(a, b)
    tally.case(e <= 1e-12, "--reproducible equals the default mode to float64 rounding",
               note=f"err {e:.2e}", cmd=run.last)


def row_bounds(phiq, phik, v, mode, den, out):
    """Per row, || |A| |V| ||_2 / |den| + ||out||_2 (|A| 1) / |den|, |A| = |phi(q)| . |phi(k)|:
    the first-order rounding bound of num / den, to be multiplied by (terms) x unit roundoff."""
    a = ref.kernel_matrix(np.abs(phiq), np.abs(phik), mode)
    av = np.matmul(a, np.abs(ref.as3d(v)).transpose(1, 0, 2)).transpose(1, 0, 2)
    a1 = a.sum(axis=2).T
    return (np.linalg.norm(av, axis=-1) + np.linalg.norm(out, axis=-1) * a1) / np.abs(den)


def taylor2_rows_f32(run, tally):
    """taylor2 in float32 on large-norm inputs, row by row (docs/design.md §2): |x~| ~ 12, so
    1 + t + t^2/2 is dominated by t^2/2; then every key orthogonal to every query in a rotated
    basis (t = 0: kernel 1, but products of size |x~|^4 / dk: sum |products| is ~3e3 times the
    kernel), where the signed sum cancels. Each row's error is held to the probabilistic
    rounding bound 2 sqrt(L) u x row_bounds, L = r + n + 4 terms (Higham and Mary 2019: a
    length-L sum errs by about sqrt(L) u sum |terms|), in float32 and, on the same rows, in
    float64. At |x| ~ 800 the float32 den can come out <= 0: the policy either refuses it
    (exit 3, naming a row; the case says which) or every row meets the bound."""
    n, h, dk, dv = 300, 2, 16, 6
    rng = np.random.default_rng(2024)
    base = dict(map="taylor2", normalize=True, n=n, h=h, dk=dk, dv=dv, threads=2, chunk=64)
    q, k, v = (6.0 * rng.standard_normal((n, h, dk)), 6.0 * rng.standard_normal((n, h, dk)),
               rng.standard_normal((n, h, dv)))
    # queries in a random half-space U, keys in its complement: t = 0, kernel 1, but the
    # products share coordinates (U is rotated), so the quadratic block cancels
    rot = np.linalg.qr(rng.standard_normal((dk, dk)))[0]
    half = lambda sc, lo, hi: np.concatenate(
        [np.zeros((n, h, lo)), sc * rng.standard_normal((n, h, hi - lo)),
         np.zeros((n, h, dk - hi))], axis=-1) @ rot
    r = 1 + dk + dk * (dk + 1) // 2
    cases = (("large-norm", (q, k), ("causal", "bidirectional"), ("f32", "f64")),
             ("keys orthogonal to queries", (half(8.0, 0, dk // 2), half(8.0, dk // 2, dk)),
              ("causal",), ("f32", "f64")),
             ("keys orthogonal to queries, |x| ~ 800", (half(200.0, 0, dk // 2),
                                                        half(200.0, dk // 2, dk)),
              ("causal",), ("f32",)))
    for tag, (qq, kk), modes, dtypes in cases:
        for mode, dtype in itertools.product(modes, dtypes):
            c = dict(base, mode=mode, dtype=dtype)
            name = f"taylor2/{mode}/{dtype}/{tag}/row-by-row"
            qs = common.save(run.path("t_q.npy"), qq, dtype)
            ks = common.save(run.path("t_k.npy"), kk, dtype)
            vs = common.save(run.path("t_v.npy"), v, dtype)
            common.rm(run.path("t_out.npy"))
            rc, _, err = run(*cmdline(c, "t", "t_out.npy"))
            pq, pk = ref.feature_map("taylor2", qs), ref.feature_map("taylor2", ks)
            want, den = ref.quadratic(pq, pk, vs, mode)
            kern = ref.kernel_matrix(pq, pk, mode)
            cancel = float((ref.kernel_matrix(np.abs(pq), np.abs(pk), mode).sum()) / kern.sum())
            if rc == 3 and "800" in tag:
                tally.case("violate" in err or "denominator" in err, name,
                           note=f"exit 3, the policy refused a den <= 0: "
                                f"{common.first_error(err)}", cmd=run.last)
                continue
            if rc != 0:
                tally.case(False, name, note=f"exit {rc}: {common.first_error(err)}", cmd=run.last)
                continue
            out, note = common.load_out(run.path("t_out.npy"), n, h, dv)
            u = 2.0 ** -24 if dtype == "f32" else 2.0 ** -53
            bound = 2.0 * np.sqrt(r + n + 4) * u * row_bounds(pq, pk, vs, mode, den, want)
            e = np.linalg.norm(out - want, axis=-1)
            worst = float(np.max(e / bound))
            tally.case(worst <= 1.0, name, worst, 1.0,
                       f"max row err / bound; sum|A|/sum A = {cancel:.0f}, "
                       f"max row rel err {float(np.max(e / np.linalg.norm(want, axis=-1))):.1e}",
                       run.last)


def main():
    args = common.parse_args(__doc__)
    run, tally = common.runner(args), common.Tally()
    for c in case_list(args.quick):
        forward_case(run, tally, c)
    taylor2_rows_f32(run, tally)
    projection_checks(run, tally)
    distribution_checks(run, tally)
    reproducible_checks(run, tally)
    tally.finish()


if __name__ == "__main__":
    main()
