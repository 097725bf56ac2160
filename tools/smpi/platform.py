#!/usr/bin/python3
"""The simulated cluster of docs/simulation.md, as a SimGrid platform and a hostfile.

A two-level fat-tree (SimGrid's FAT_TREE cluster, full bisection) of `nodes` nodes:
leaves of `leaf` nodes, each leaf with one link up to every top switch. Every link is
100 Gb/s (12.5 GB/s) with 0.5 us latency, so a message crosses 2 links (same leaf, 1 us) or
4 links (different leaves, 2 us). Two ranks per node (one core each, as on the 2-core machine
the compute rate was measured on); they talk through the node's loopback at 20 GB/s and
0.2 us (shared memory). Host speed is nominal: the driver charges measured seconds as flops
at this speed (tools/smpi/simscan.c); a node has one core per rank, so its ranks compute
side by side.

usage: platform.py OUTDIR [--nodes 2048] [--leaf 32] [--ranks-per-node 2]
writes OUTDIR/fattree.xml and OUTDIR/hosts (one line per rank, rank i on node i / rpn)."""
import argparse, os

ap = argparse.ArgumentParser()
ap.add_argument("outdir")
ap.add_argument("--nodes", type=int, default=2048)
ap.add_argument("--leaf", type=int, default=32)
ap.add_argument("--ranks-per-node", type=int, default=2)
a = ap.parse_args()
if a.nodes % a.leaf:
    raise SystemExit("linattn: error: --nodes must be a multiple of --leaf")
leaves = a.nodes // a.leaf
os.makedirs(a.outdir, exist_ok=True)
# FAT_TREE topo_parameters: levels; down links per switch by level; up links per node/switch
# by level; parallel links by level. Level 1: leaves of `leaf` nodes, each node 1 link up;
# level 2: `leaves` top... switches with one link to every leaf, each leaf `leaf` links up.
up2 = a.leaf  # top switches = links up from each leaf: full bisection
topo = f"2;{a.leaf},{leaves};1,{up2};1,1"
xml = f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<!-- tools/smpi/platform.py: {a.nodes} nodes, {a.ranks_per_node} ranks per node, fat-tree {topo};
     links 100 Gb/s, 0.5 us; loopback 20 GB/s, 0.2 us (docs/simulation.md "The platform") -->
<platform version="4.1">
  <cluster id="fattree" prefix="node-" radical="0-{a.nodes - 1}" suffix="" speed="1Gf" core="{a.ranks_per_node}"
           bw="12.5GBps" lat="0.5us" loopback_bw="20GBps" loopback_lat="0.2us"
           topology="FAT_TREE" topo_parameters="{topo}"/>
</platform>
"""
open(os.path.join(a.outdir, "fattree.xml"), "w").write(xml)
with open(os.path.join(a.outdir, "hosts"), "w") as f:
    for n in range(a.nodes):
        for _ in range(a.ranks_per_node):
            f.write(f"node-{n}\n")
