#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses (tests/fuzz/README.md) into corpus/NAME/:
valid and near-valid inputs, a few KB per harness. The files are committed; run this again
only to change them (python3 make_corpus.py; no NumPy needed, the .npy files are spelled out
byte by byte so that the near-valid ones can be exactly what they are)."""
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def npy(descr="<f8", shape=(2,), payload=None, version=1, fortran="False", dict_text=None,
        pad=True):
    """An .npy file; payload defaults to zeros of the right size."""
    if dict_text is None:
        dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
        dict_text = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (descr, fortran, dims)
    prefix = 10 if version == 1 else 12
    h = dict_text.encode()
    if pad:
        total = (prefix + len(h) + 1 + 63) // 64 * 64
        h = h + b" " * (total - prefix - len(h) - 1) + b"\n"
    lenb = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    if payload is None:
        n = 1
        for d in shape:
            n *= d
        payload = bytes(n * (4 if descr.endswith("4") else 8))
    return b"\x93NUMPY" + bytes([version, 0]) + lenb + h + payload


def f8(*xs):
    return struct.pack("<%dd" % len(xs), *xs)


def f4(*xs):
    return struct.pack("<%df" % len(xs), *xs)


def i8(*xs):
    return struct.pack("<%dq" % len(xs), *xs)


def npy_seeds():
    return {
        "f8_2x3": npy("<f8", (2, 3), f8(1, 2, 3, 4, 5, 6)),
        "f4_4x1x2_v2": npy("<f4", (4, 1, 2), f4(*range(8)), version=2),
        "i8_5_v3": npy("<i8", (5,), i8(0, 1, 2, 3, 4), version=3),
        "f8_scalar": npy("<f8", (), f8(3.5)),
        "f4_0x7_empty": npy("<f4", (0, 7)),
        "f8_trailing_comma": npy(dict_text="{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2,), }",
                                 payload=f8(1, 2, 3, 4)),
        "f8_keys_reordered": npy(dict_text="{'shape': (3,), 'fortran_order': False, 'descr': '<f8'}",
                                 payload=f8(1, 2, 3)),
        "f8_unpadded": npy("<f8", (1,), f8(1), pad=False),
        "f8_extra_payload": npy("<f8", (1,), f8(1, 2, 3)),
        "f4_8_dims": npy("<f4", (1, 2, 1, 1, 1, 1, 1, 2), f4(1, 2, 3, 4)),
        "near_9_dims": npy("<f4", (1, 1, 1, 1, 1, 1, 1, 1, 2), f4(1, 2)),
        "near_fortran": npy("<f8", (2, 2), f8(1, 2, 3, 4), fortran="True"),
        "near_big_endian": npy(">f4", (2,), b"\0\0\x80?" * 2),
        "near_dtype_u1": npy("|u1", (4,), b"abcd"),
        "near_truncated_payload": npy("<f8", (4, 4), f8(1, 2, 3)),
        "near_shape_overflow": npy(dict_text="{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"),
        "near_shape_not_tuple": npy(dict_text="{'descr': '<f8', 'fortran_order': False, 'shape': (2), }",
                                    payload=f8(1, 2)),
        "near_negative_dim": npy(dict_text="{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }"),
        "near_duplicate_key": npy(dict_text="{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (1,), }",
                                  payload=f8(1)),
        "near_missing_shape": npy(dict_text="{'descr': '<f8', 'fortran_order': False}", payload=f8(1)),
        "near_structured": npy(dict_text="{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1,), }",
                               payload=f8(1)),
        "near_header_past_end": b"\x93NUMPY\x01\x00\xff\x00{'descr': '<f8'",
        "near_version_4": b"\x93NUMPY\x04\x00" + npy("<f8", (1,), f8(1))[8:],
        "near_magic": b"\x93NUMPX\x01\x00",
    }


def seg_input(flags, chunk, body, N=None):
    head = bytes([flags, chunk])
    if N is not None:
        head += i8(N)
    return head + body


def segments_seeds():
    # flags: bit0 N = last offset, bit1 .npy, bit2 bidirectional, bit3 f32, bits 4..7 window
    return {
        "raw_causal": seg_input(0x01, 3, i8(0, 3, 7, 10)),
        "raw_causal_window3_f32": seg_input(0x39, 2, i8(0, 4, 9, 16, 17)),
        "raw_bidirectional": seg_input(0x05, 7, i8(0, 1, 2, 30, 31)),
        "raw_explicit_N": seg_input(0x00, 0, i8(0, 10), N=10),
        "npy_causal": seg_input(0x03, 4, npy("<i8", (4,), i8(0, 5, 12, 20))),
        "npy_bidirectional_f32": seg_input(0x0f, 1, npy("<i8", (3,), i8(0, 40, 96))),
        "npy_window15": seg_input(0xf3, 5, npy("<i8", (6,), i8(0, 1, 17, 18, 50, 64))),
        "npy_large_N": seg_input(0x02, 0, npy("<i8", (3,), i8(0, 500, 1000)), N=1000),
        "near_npy_f8": seg_input(0x03, 0, npy("<f8", (3,), f8(0, 5, 10))),
        "near_npy_2d": seg_input(0x03, 0, npy("<i8", (2, 2), i8(0, 5, 5, 10))),
        "near_npy_one_offset": seg_input(0x03, 0, npy("<i8", (1,), i8(0))),
        "near_not_from_0": seg_input(0x01, 0, i8(1, 5, 10)),
        "near_not_increasing": seg_input(0x01, 0, i8(0, 5, 5, 10)),
        "near_wrong_N": seg_input(0x00, 0, i8(0, 5, 10), N=11),
        "near_decreasing_npy": seg_input(0x03, 0, npy("<i8", (4,), i8(0, 8, 3, 10))),
    }


def proj_input(H, dk, features, body):
    return bytes([H, dk, features]) + body


def projection_seeds():
    nan, inf = float("nan"), float("inf")
    return {
        "f8_2x3x4": proj_input(0, 0, 0, npy("<f8", (2, 3, 4), f8(*[0.1 * i for i in range(24)]))),
        "f4_shared_5x2": proj_input(3, 0, 0, npy("<f4", (5, 2), f4(*range(10)))),
        "f8_1x1x1": proj_input(1, 1, 7, npy("<f8", (1, 1, 1), f8(-2.5))),
        "f4_3x4x2_v2": proj_input(0, 2, 0, npy("<f4", (3, 4, 2), f4(*[1.0] * 24), version=2)),
        "near_nan": proj_input(0, 0, 0, npy("<f8", (1, 2, 2), f8(1, nan, 3, 4))),
        "near_inf_f4": proj_input(0, 0, 0, npy("<f4", (2, 2), f4(1, 2, inf, 4))),
        "near_heads_mismatch": proj_input(5, 0, 0, npy("<f8", (2, 3, 4), f8(*range(24)))),
        "near_dk_mismatch": proj_input(0, 9, 0, npy("<f8", (3, 4), f8(*range(12)))),
        "near_int64": proj_input(0, 0, 0, npy("<i8", (2, 2), i8(1, 2, 3, 4))),
        "near_1d": proj_input(0, 0, 0, npy("<f8", (4,), f8(1, 2, 3, 4))),
        "near_m0": proj_input(0, 0, 16, npy("<f8", (2, 0, 3))),
        "near_m_too_large": proj_input(0, 0, 4, npy("<f4", (70000, 0))),
        "near_4d": proj_input(0, 0, 0, npy("<f8", (1, 1, 2, 2), f8(1, 2, 3, 4))),
    }


def cli_input(sub, *args):
    return bytes([sub]) + b"\0".join(a.encode() for a in args)


def cli_seeds():
    RUN, GRAD, BENCH = 0, 1, 2
    return {
        "run_defaults": cli_input(RUN),
        "run_synthetic": cli_input(RUN, "--n", "1024", "--heads", "2", "--dk", "16", "--dv", "8",
                                   "--no-progress", "--report", "r.json", "--force"),
        "run_operator": cli_input(RUN, "--mode", "bidirectional", "--feature-map", "favor+",
                                  "--features", "64", "--denominator", "add:1e-6", "--chunk", "32",
                                  "--dtype", "f64", "--threads", "2", "--kernels", "blas",
                                  "--print-options"),
        "run_window": cli_input(RUN, "--window", "16", "--segments", "s.npy", "--scale", "0.125",
                                "--input-scale", "2", "--seed", "5", "--block-tokens", "100",
                                "--denominator", "clamp:1e-3", "--progress"),
        "run_signed": cli_input(RUN, "--feature-map", "trig", "--normalize", "off", "--allow-signed",
                                "--projection", "p.npy", "--save-projection", "p2.npy",
                                "--denominator", "zero-empty"),
        "run_files": cli_input(RUN, "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--out", "o.npy"),
        "grad_files": cli_input(GRAD, "--q", "q.npy", "--k", "k.npy", "--v", "v.npy", "--grad-out",
                                "g.npy", "--grad-q", "gq.npy", "--grad-k", "gk.npy", "--grad-v",
                                "gv.npy", "--feature-map", "precomputed"),
        "bench_lists": cli_input(BENCH, "--n", "1024,4096", "--modes", "causal,bidirectional",
                                 "--feature-maps", "elu1,favor+,favor-hyp", "--features", "16,32",
                                 "--threads", "1,2", "--baselines", "all", "--baseline-max-n", "2048",
                                 "--check", "--repeat", "2", "--pblas-block", "8",
                                 "--pblas-panel-rows", "40", "--csv", "b.csv"),
        "bench_probe": cli_input(BENCH, "--gemm-probe", "--gemm-size", "256", "--no-linear",
                                 "--dtype", "f64", "--print-options"),
        "help_run": cli_input(RUN, "--help"),
        "help_bench": cli_input(BENCH, "-h"),
        "near_mask": cli_input(RUN, "--mask", "m.npy"),
        "near_checkpoint": cli_input(GRAD, "--checkpoint-every", "10"),
        "near_eps0": cli_input(RUN, "--denominator", "add:0"),
        "near_negative_n": cli_input(RUN, "--n", "-1"),
        "near_unknown": cli_input(GRAD, "--no-such", "1"),
        "near_other_sub": cli_input(RUN, "--grad-out", "g.npy"),
        "near_missing_value": cli_input(BENCH, "--n"),
        "near_bench_signed": cli_input(BENCH, "--feature-maps", "elu1,identity"),
        "near_list_empty_item": cli_input(BENCH, "--n", "1,,2"),
        "near_check_too_large": cli_input(BENCH, "--n", "8192", "--baselines", "softmax", "--check"),
        "near_q_only": cli_input(RUN, "--q", "q.npy"),
        "bench_list_64": cli_input(BENCH, "--threads", ",".join(["1"] * 64)),
        "near_list_65": cli_input(BENCH, "--features", ",".join(["16"] * 65)),
        "near_long_value": cli_input(RUN, "--denominator", "add:" + "1" * 600),
    }


def main():
    for name, seeds in (("npy", npy_seeds()), ("segments", segments_seeds()),
                        ("projection", projection_seeds()), ("cli", cli_seeds())):
        d = os.path.join(HERE, "corpus", name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for k, v in seeds.items():
            with open(os.path.join(d, k), "wb") as f:
                f.write(v)
        print("%s: %d inputs, %d bytes" % (name, len(seeds), sum(len(v) for v in seeds.values())))


if __name__ == "__main__":
    main()
