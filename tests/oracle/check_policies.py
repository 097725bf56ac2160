#!/usr/bin/python3
"""Denominator policies (docs/design.md §1), applied to the TRUE denominator.

Claims tested:
- `error`: a zero denominator (relu row whose features are all 0) exits 3, writes no output
  file (not even a temporary one), and says `linattn: error:` with the count and the first
  (token, head);
- `zero-empty`: exactly-zero rows are 0, the other rows equal the reference; a negative
  denominator is still an error (exit 3);
- `add:E`, `clamp:E`: num/(den+E) and num/max(den,E), for E where the policy changes rows;
- favor+/favor-hyp `add:E`, `clamp:E` act on the unstabilized denominator (input scale 3, so a
  stabilizer must be active), i.e. E is not added to a rescaled den;
- identity/trig in normalized mode without --allow-signed exit 2 mentioning "signed"; the
  unnormalized identity operator needs no opt-in; unnormalized relu ignores zero dens;
- `add:0` is the raw ratio num/den for the signed identity map with --allow-signed, negative
  denominators included; `add:-1` and `clamp:0` are refused (exit 2, naming --denominator);
- the --report denominator statistics match the reference (min, max, count_nonpositive).

Usage: check_policies.py --linattn build/linattn --workdir /tmp/la_pol
"""
import json
import os

import numpy as np

import common
import reference as ref

TOL = {"f64": 1e-12, "f32": 1e-5}


def relu_data(n=60, h=2, dk=6, dv=4, zero_q=((17, 1),), zero_k=()):
    """Positive-offset data; the listed query/key rows are made all-negative (phi = 0)."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((n, h, dk)) + 1.5
    k = rng.standard_normal((n, h, dk)) + 1.5
    v = rng.standard_normal((n, h, dv))
    q, k = np.maximum(q, 0.05), np.maximum(k, 0.05)   # no accidental zero rows elsewhere
    for t, hh in zero_q:
        q[t, hh] = -np.abs(q[t, hh]) - 0.1
    for t, hh in zero_k:
        k[t, hh] = -np.abs(k[t, hh]) - 0.1
    return q, k, v


class Ctx:
    def __init__(self, run, tally):
        self.run, self.tally = run, tally

    def write(self, q, k, v, dtype="f64"):
        return tuple(common.save(self.run.path(f"{n}.npy"), x, dtype)
                     for n, x in zip("qkv", (q, k, v)))

    def invoke(self, mp, mode, policy, dtype="f64", normalize=True, extra=()):
        """Run on q/k/v.npy -> out.npy; returns (rc, stderr, new files in workdir)."""
        common.rm(self.run.path("out.npy"))
        before = set(os.listdir(self.run.workdir))
        args = ["--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--out", "out.npy",
                "--mode", mode, "--feature-map", mp, "--dtype", dtype,
                "--normalize", "on" if normalize else "off", "--threads", "2"]
        if normalize:  # --normalize off refuses a --denominator (there is none)
            args += ["--denominator", policy]
        args += [str(e) for e in extra]
        rc, _, err = self.run(*args)
        new = sorted(set(os.listdir(self.run.workdir)) - before)
        return rc, err, new

    def compare(self, name, out_expected, dtype="f64", new=(), rc=0, err=""):
        if rc != 0:
            return self.tally.case(False, name, note=f"exit {rc}: {common.first_error(err)}",
                                   cmd=self.run.last)
        n, h, dv = out_expected.shape
        out, note = common.load_out(self.run.path("out.npy"), n, h, dv)
        if out is None:
            return self.tally.case(False, name, note=note, cmd=self.run.last)
        e = ref.rel_err(out, out_expected)
        return self.tally.case(e <= TOL[dtype], name, e, TOL[dtype], note, self.run.last)

    def expect_fail(self, name, rc_want, rc, err, new, must_name=None, must_word=None):
        probs = [] if rc == rc_want else [f"exit {rc}, want {rc_want}"]
        if rc != 0:
            probs += common.error_line_problems(rc, err)
        if new:
            probs.append(f"files created: {new}")
        msg = common.first_error(err)
        if must_name and not common.names_in_order(msg, must_name):
            probs.append(f"message does not name {must_name}")
        if must_word and must_word not in msg.lower():
            probs.append(f"message does not mention '{must_word}'")
        return self.tally.case(not probs, name, note="; ".join(probs) + f" | {msg}",
                               cmd=self.run.last)


def relu_policies(cx):
    zq = ((17, 1), (40, 0))
    for mode in ("causal", "bidirectional"):
        # One zero row: error names it.
        q, k, v = cx.write(*relu_data(zero_q=((17, 1),)))
        rc, err, new = cx.invoke("relu", mode, "error")
        cx.expect_fail(f"relu/{mode}: policy error on one zero den -> exit 3, names (17, 1)",
                       3, rc, err, new, must_name=[17, 1])
        # Several: in causal mode an all-negative key 0 also empties row (0, 0).
        zk = ((0, 0),) if mode == "causal" else ()
        q, k, v = cx.write(*relu_data(zero_q=zq, zero_k=zk))
        phq, phk = ref.feature_map("relu", q), ref.feature_map("relu", k)
        num, den = ref.quadratic(phq, phk, v, mode, normalize=False)
        bad = np.argwhere(den <= 0)
        rc, err, new = cx.invoke("relu", mode, "error")
        cx.expect_fail(f"relu/{mode}: {len(bad)} zero dens -> exit 3, names the first "
                       f"{tuple(bad[0])}", 3, rc, err, new, must_name=list(bad[0]))
        msg = common.first_error(err)
        cx.tally.case(len(bad) in common.numbers_in(msg),
                      f"relu/{mode}: error message names the count {len(bad)}", note=msg)
        for dtype in ("f64", "f32"):
            q, k, v = cx.write(*relu_data(zero_q=zq, zero_k=zk), dtype=dtype)
            phq, phk = ref.feature_map("relu", q), ref.feature_map("relu", k)
            r, den = ref.quadratic(phq, phk, v, mode, policy="zero-empty")
            rc, err, new = cx.invoke("relu", mode, "zero-empty", dtype)
            cx.compare(f"relu/{mode}/{dtype}: zero-empty = reference ({int((den == 0).sum())} "
                       "empty rows)", r, dtype, new, rc, err)
            if rc == 0:
                out = np.load(cx.run.path("out.npy")).reshape(r.shape)
                cx.tally.case(np.all(out[den == 0] == 0.0),
                              f"relu/{mode}/{dtype}: zero-empty rows are exactly 0")
            med = np.median(den[den > 0])
            for kind in ("add", "clamp"):
                for e in (1e-3, float(f"{med:.1e}")):   # E = median: policy changes rows
                    pol = f"{kind}:{e:g}"
                    r, _ = ref.quadratic(phq, phk, v, mode, policy=pol)
                    rc, err, new = cx.invoke("relu", mode, pol, dtype)
                    cx.compare(f"relu/{mode}/{dtype}: {pol} = reference", r, dtype, new, rc, err)
        # Unnormalized: the denominator plays no part; zero rows are simply 0.
        q, k, v = cx.write(*relu_data(zero_q=zq, zero_k=zk))
        r, _ = ref.quadratic(ref.feature_map("relu", q), ref.feature_map("relu", k), v, mode,
                             normalize=False)
        rc, err, new = cx.invoke("relu", mode, "error", normalize=False)
        cx.compare(f"relu/{mode}: unnormalized with zero dens is fine", r, "f64", new, rc, err)


def signed_policies(cx):
    rng = np.random.default_rng(11)
    n, h, dk, dv = 50, 2, 8, 5
    q, k, v = (rng.standard_normal((n, h, d)) for d in (dk, dk, dv))
    for mp in ("identity", "trig"):
        cx.write(q, k, v)
        rc, err, new = cx.invoke(mp, "causal", "error",
                                 extra=["--features", 16] if mp == "trig" else [])
        cx.expect_fail(f"{mp}: normalized without --allow-signed -> exit 2 mentioning 'signed'",
                       2, rc, err, new, must_word="signed")
    r, _ = ref.quadratic(q, k, v, "causal", normalize=False)
    rc, err, new = cx.invoke("identity", "causal", "error", normalize=False)
    cx.compare("identity: unnormalized needs no --allow-signed, = reference", r, "f64", new,
               rc, err)
    # add:0 is the raw ratio, negative dens included (identity: phi(x) = x, no projection).
    qq, kk = 0.3 * q + 1.0, 0.3 * k + 1.0
    qq[9, 0] = -qq[9, 0]
    for mode in ("causal", "bidirectional"):
        for dtype in ("f64", "f32"):
            cx.write(qq, kk, v, dtype=dtype)
            qd, kd, vd = (np.load(cx.run.path(f"{t}.npy")).astype(np.float64) for t in "qkv")
            r, den = ref.quadratic(qd, kd, vd, mode, policy="add:0")
            rc, err, new = cx.invoke("identity", mode, "add:0", dtype, extra=["--allow-signed"])
            cx.compare(f"identity/{mode}/{dtype}: add:0 = raw ratio num/den "
                       f"({int((den < 0).sum())} negative dens)", r, dtype, new, rc, err)
    cx.write(qq, kk, v)
    for pol in ("add:-1", "clamp:0"):
        rc, err, new = cx.invoke("identity", "causal", pol, extra=["--allow-signed"])
        cx.expect_fail(f"{pol} refused -> exit 2 naming --denominator", 2, rc, err, new,
                       must_word="--denominator")
    # Negative den: zero-empty still fails (exit 3). Query row 9 of head 0 points away.
    qq, kk = 0.3 * q + 1.0, 0.3 * k + 1.0
    qq[9, 0] = -qq[9, 0]
    cx.write(qq, kk, v)
    for mode in ("causal", "bidirectional"):
        rc, err, new = cx.invoke("identity", mode, "zero-empty", extra=["--allow-signed"])
        cx.expect_fail(f"identity/{mode}: zero-empty with a negative den -> exit 3, names (9, 0)",
                       3, rc, err, new, must_name=[9, 0])


def stabilized_policies(cx):
    """Input scale 3, dk 16: exp(omega.x~ - |x~|^2/2) spans e^-40..e^5, so the engine must
    stabilize; E is set near the median TRUE den so that add/clamp change many rows."""
    rng = np.random.default_rng(5)
    n, h, dk, dv, m = 128, 2, 16, 6, 32
    q, k, v = 3 * rng.standard_normal((n, h, dk)), 3 * rng.standard_normal((n, h, dk)), \
        rng.standard_normal((n, h, dv))
    cx.write(q, k, v)
    for mp in ("favor+", "favor-hyp"):
        for mode in ("causal", "bidirectional"):
            common.rm(cx.run.path("P.npy"))
            rc, err, _ = cx.invoke(mp, mode, "error",
                                   extra=["--features", m, "--seed", 3, "--save-projection",
                                          "P.npy"])
            if rc != 0:
                cx.tally.case(False, f"{mp}/{mode}: stabilized run", note=common.first_error(err),
                              cmd=cx.run.last)
                continue
            om = np.load(cx.run.path("P.npy"))
            phq, phk = ref.feature_map(mp, q, om), ref.feature_map(mp, k, om)
            plain, den = ref.quadratic(phq, phk, v, mode)
            e = float(f"{np.median(den):.1e}")
            # Performer-style: E added on the stabilized scale, i.e. E e^(c_q + C_h) on the
            # true scale, with c_q the query row max and C_h the key max of log phi.
            e_stab = e * np.exp(np.log(phq).max(-1) + np.log(phk).max(axis=(0, 2)))
            num, _ = ref.quadratic(phq, phk, v, mode, normalize=False)
            for kind in ("add", "clamp"):
                pol = f"{kind}:{e:g}"
                r, _ = ref.quadratic(phq, phk, v, mode, policy=pol)
                wrong = num / ((den + e_stab) if kind == "add" else np.maximum(den, e_stab))[
                    ..., None]
                # Both > tol, or the test could not tell the policies apart.
                effect = min(ref.rel_err(r, plain), ref.rel_err(r, wrong))
                rc, err, new = cx.invoke(mp, mode, pol, extra=["--projection", "P.npy",
                                                              "--features", m])
                ok = cx.compare(f"{mp}/{mode}: {pol} on the true den (den in "
                                f"[{den.min():.1e}, {den.max():.1e}], policy effect "
                                f"{effect:.1e} vs none and vs stabilized-scale E)", r, "f64",
                                new, rc, err)
                if ok and effect < 1e-6:
                    cx.tally.case(False, f"{mp}/{mode}: {pol} test is not discriminating")


def report_stats(cx):
    q, k, v = cx.write(*relu_data(zero_q=((17, 1), (40, 0))))
    _, den = ref.quadratic(ref.feature_map("relu", q), ref.feature_map("relu", k), v,
                           "bidirectional", normalize=False)
    common.rm(cx.run.path("R.json"))
    rc, err, _ = cx.invoke("relu", "bidirectional", "zero-empty", extra=["--report", "R.json"])
    try:
        rep = json.load(open(cx.run.path("R.json")))
        d = rep["denominator"]
        probs = []
        if rep.get("denominator_policy") != "zero-empty":
            probs.append(f"denominator_policy={rep.get('denominator_policy')!r}")
        if d["count_nonpositive"] != int((den <= 0).sum()):
            probs.append(f"count_nonpositive={d['count_nonpositive']} want {(den <= 0).sum()}")
        if abs(d["min"] - den.min()) > 1e-12 * den.max():
            probs.append(f"min={d['min']} want {den.min()}")
        if abs(d["max"] - den.max()) > 1e-12 * den.max():
            probs.append(f"max={d['max']} want {den.max()}")
        for key, want in (("mode", "bidirectional"), ("feature_map", "relu"), ("normalize", True),
                          ("n", 60), ("heads", 2), ("dk", 6), ("dv", 4), ("dtype", "f64")):
            if rep.get(key) != want:
                probs.append(f"{key}={rep.get(key)!r} want {want!r}")
        note = "; ".join(probs)
    except Exception as ex:  # missing file, bad JSON or missing key
        probs, note = ["bad report"], f"exit {rc}: {type(ex).__name__}: {ex}"
    cx.tally.case(not probs, "report: denominator statistics and fields match the reference",
                  note=note, cmd=cx.run.last)


def main():
    args = common.parse_args(__doc__)
    cx = Ctx(common.runner(args), common.Tally())
    relu_policies(cx)
    signed_policies(cx)
    stabilized_policies(cx)
    report_stats(cx)
    cx.tally.finish()


if __name__ == "__main__":
    main()
