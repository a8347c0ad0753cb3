#!/usr/bin/env bash
# check-layout: fails on an include that goes up a floor and on include
# cycles (docs/architecture.md, "Floors").  `make check-layout` runs it with
# the Makefile's -I directories; tests/integration/test_check_layout.sh tests it.
#
#   scripts/check-layout.sh [-C ROOT] [-I DIR]...
#
# Floors, low to high; a file may include its own floor and the ones listed:
#   core/util, core/geometry, core/projectors, core/backend (with its
#   cpu/, opencl/, cuda/, tensor/), core/algo, core/plan: the library, one
#                   floor per folder in that order, each may include the
#                   ones below it, and generated headers (build/gen)
#   kernels         kernels/**: itself and core's kernel-contract headers only
#   server/worker   server/worker/**: itself and core
#   server/base, server/store, server/pacs, server/live, server/jobs,
#   server/http, server (the daemon's top: server/*.c, daemon and main):
#                   the daemon, one floor per folder in that order, each may
#                   include the ones below it, core, and of server/worker
#                   only its public headers (WORKER_PUBLIC); a file in any
#                   other folder of server/ fails (add its floor here)
#   top             clients/, tools/, bench/, tests/: anything
#
# With --calls DIR (the release objects, build/rel), the same floors and no
# cycles are checked on calls too: each daemon file's object (DIR/FILE.o,
# as the Makefile names them) is read with nm; a symbol it leaves undefined
# and another daemon object defines is a call (or a data reference) from one
# file to the other.  A call up a floor fails, and so does any cycle of
# calls between files of server/ (a function reached only through a pointer
# in the same file's table, as the store's ops, is no symbol reference and
# no edge).  A file whose object is missing fails: build first.
#
# A quoted include is resolved as the compiler does: the including file's own
# directory first, then each -I directory in order (-I flags outside the tree
# are ignored; an include that resolves nowhere in the tree is a system or
# not-yet-generated header and is skipped).  Cycles are reported at two
# levels: between files (a.h -> b.h -> a.h) and between modules, a module
# being one directory's foo.c + foo.h (+ foo.cu/.cuh): a.c includes b.h and
# b.c includes a.h is a cycle; foo_impl.h, the header that the files of one
# module share (server/jobs/runner_impl.h), is part of module foo.  A cycle
# whose every member is listed on one line of scripts/check-layout.allow is
# reported as allowed, not failed.
set -euo pipefail
root=.
incs=()
calls=
while [ $# -gt 0 ]; do
	case $1 in
	-C) root=$2; shift 2;;
	-I) incs+=("$2"); shift 2;;
	--calls) calls=$2; shift 2;;
	-I*) incs+=("${1#-I}"); shift;;
	-h|--help) sed -n '2,/^set -e/{/^set -e/!p}' "$0"; exit 0;;
	*) echo "check-layout: unknown argument $1" >&2; exit 2;;
	esac
done
# The Makefile's order (CPPFLAGS + mk/server.mk) when run by hand.
[ ${#incs[@]} -gt 0 ] || incs=(core build/gen server/worker server)
exec python3 - "$root" "$calls" "${incs[@]}" <<'PY'
import os
import re
import sys

import subprocess

root, calls, incs = sys.argv[1], sys.argv[2], sys.argv[3:]
os.chdir(root)

# Core headers that device code may include (nvcc -Icore): the launch
# contracts of kernels/cuda, the BSR types its tensor kernels take, and the
# element-wise formulas shared by host, OpenCL and CUDA.
KERNEL_CONTRACT = {"cuda_kernels.h", "tensor_kernels.cuh", "tensor_gpu.h", "tensor_sym.h", "bsr.h",
                   "elementwise_ops.h"}
# What the daemon may include from the worker's floor (docs/server.md).
WORKER_PUBLIC = {"spec.h", "jfield.h", "durable.h", "device_json.h", "worker_proto.h"}
ALLOW_FILE = "scripts/check-layout.allow"
TOPS = ("core", "kernels", "server", "clients", "tools", "bench", "tests")
EXTS = (".c", ".h", ".cu", ".cuh", ".cl", ".cpp", ".cc")
# core's floors, low to high (docs/architecture.md, "Floors")
CORE_FLOORS = ["core/util", "core/geometry", "core/projectors", "core/backend", "core/algo", "core/plan"]
# the daemon's floors, low to high (docs/architecture.md, "Floors"); "server"
# is its top, the files directly in server/
DAEMON_FLOORS = ["server/base", "server/store", "server/pacs", "server/live", "server/jobs", "server/http", "server"]
RANK = {"gen": -1, "kernels": 10, "server/worker": 11, "top": 30}
RANK.update({f: i for i, f in enumerate(CORE_FLOORS)})
RANK.update({f: 20 + i for i, f in enumerate(DAEMON_FLOORS)})
CORE = set(CORE_FLOORS)
DAEMON = set(DAEMON_FLOORS)
MAY = {  # floor -> floors it may include (besides itself and generated headers)
    "kernels": CORE,  # contract headers only, checked below
    "server/worker": CORE,
}
MAY.update({f: set(CORE_FLOORS[:i]) for i, f in enumerate(CORE_FLOORS)})
# public worker headers only, checked below
MAY.update({f: CORE | {"server/worker"} | set(DAEMON_FLOORS[:i]) for i, f in enumerate(DAEMON_FLOORS)})


def floor(path):
    parts = path.split("/")
    if parts[0] == "core":
        # a file directly in core/ (none today) sits with the top of core
        return "core/" + parts[1] if len(parts) > 2 and "core/" + parts[1] in CORE else "core/plan"
    if parts[0] == "kernels":
        return "kernels"
    if parts[0] == "server":
        if len(parts) == 2:
            return "server"
        if parts[1] == "worker":
            return "server/worker"
        return "server/" + parts[1]  # not a floor unless in DAEMON_FLOORS: reported
    if parts[0] in TOPS:
        return "top"
    return "gen"


def in_tree(path):
    return not path.startswith("../") and not os.path.isabs(path)


files = []
for top in TOPS:
    for dp, dns, fns in os.walk(top):
        dns.sort()
        files += [os.path.normpath(os.path.join(dp, f)) for f in sorted(fns) if f.endswith(EXTS)]

errors = []
for f in files:
    fl = floor(f)
    if fl.startswith("server/") and fl not in DAEMON and fl != "server/worker":
        errors.append("%s: %s is no floor of the daemon (%s)" % (f, fl, " < ".join(DAEMON_FLOORS)))

inc_re = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
dirs = [os.path.normpath(d) for d in incs if not os.path.isabs(d)]
edges = {}       # file -> {included file: line}
n_inc = 0
for f in files:
    with open(f, errors="replace") as fh:
        text = fh.read()
    out = edges.setdefault(f, {})
    for m in inc_re.finditer(text):
        name, line = m.group(1), text.count("\n", 0, m.start()) + 1
        target = None
        for d in [os.path.dirname(f)] + dirs:
            p = os.path.normpath(os.path.join(d, name))
            if in_tree(p) and os.path.isfile(p):
                target = p
                break
        if target is None:
            continue
        n_inc += 1
        out.setdefault(target, line)
        a, b = floor(f), floor(target)
        if a == "top" or b in (a, "gen") or a not in RANK or b not in RANK:
            continue
        where = '%s:%d: #include "%s" (%s)' % (f, line, name, target)
        if RANK[b] > RANK[a]:
            errors.append("%s: upward include: floor %s may not include floor %s" % (where, a, b))
        elif b not in MAY[a]:
            errors.append("%s: floor %s may not include floor %s" % (where, a, b))
        elif a == "kernels" and os.path.basename(target) not in KERNEL_CONTRACT:
            errors.append("%s: kernels/ may include only core's kernel-contract headers (%s)"
                          % (where, ", ".join(sorted(KERNEL_CONTRACT))))
        elif a in DAEMON and b == "server/worker" and os.path.basename(target) not in WORKER_PUBLIC:
            errors.append("%s: the daemon may include only the worker's public headers (%s)"
                          % (where, ", ".join(sorted(WORKER_PUBLIC))))


def sccs(graph):
    """Tarjan's strongly connected components, iteratively; those that hold a cycle."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = n[0]; n[0] += 1
        stack.append(start); on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]; n[0] += 1
                    stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph.get(v, ()):
                    out.append(sorted(comp))
    return out


def one_cycle(graph, comp):
    """A shortest path from comp[0] back to itself inside the component."""
    s, inside = comp[0], set(comp)
    prev, frontier = {s: None}, [s]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == s:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [s]
                if w in inside and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp + [s]


def module(path):
    stem, ext = os.path.splitext(path)
    if ext == ".h" and stem.endswith("_impl"):
        stem = stem[:-len("_impl")]  # foo_impl.h: the private half of module foo
    return stem if ext in (".c", ".h", ".cu", ".cuh", ".cpp", ".cc") else path


file_graph = {f: set(t) for f, t in edges.items()}
mod_graph, why = {}, {}
for f, ts in edges.items():
    for t, line in ts.items():
        a, b = module(f), module(t)
        if a != b:
            mod_graph.setdefault(a, set()).add(b)
            why.setdefault((a, b), "%s:%d includes %s" % (f, line, t))

allowed = []
if os.path.isfile(ALLOW_FILE):
    with open(ALLOW_FILE) as fh:
        for raw in fh:
            entry = raw.split("#", 1)[0].split()
            if entry:
                allowed.append(set(entry))
used = set()


def allowance(comp):
    names = {c for c in comp} | {module(c) for c in comp}
    for i, entry in enumerate(allowed):
        if all(c in entry or module(c) in entry for c in comp) and entry <= names:
            used.add(i)
            return True
    return False


notes = []
for kind, graph in (("file", file_graph), ("module", mod_graph)):
    for comp in sccs(graph):
        cyc = one_cycle(graph, comp)
        text = " -> ".join(cyc)
        if kind == "module":
            text += " (" + "; ".join(why[(a, b)] for a, b in zip(cyc, cyc[1:])) + ")"
        if len(comp) > len(cyc) - 1:
            text += " [component: %s]" % ", ".join(comp)
        if allowance(comp):
            notes.append("allowed %s cycle (%s): %s" % (kind, ALLOW_FILE, text))
        else:
            errors.append("%s include cycle: %s" % (kind, text))
for i, entry in enumerate(allowed):
    if i not in used:
        notes.append("warning: %s lists a cycle that no longer exists: %s (delete the line)"
                     % (ALLOW_FILE, " ".join(sorted(entry))))

n_calls = 0
if calls:
    # Calls: one edge per (file, file) that a symbol links, from nm's
    # defined and undefined globals of each daemon object.
    srcs = [f for f in files if floor(f) in DAEMON and f.endswith((".c", ".cc"))
            and not os.path.basename(f).startswith("main_")]
    defined, undefined = {}, {}
    for f in srcs:
        o = os.path.join(calls, os.path.splitext(f)[0] + ".o")
        if not os.path.isfile(o):
            errors.append("%s: no object %s to read its calls from (build first)" % (f, o))
            continue
        out = subprocess.run(["nm", "-P", o], capture_output=True, text=True, check=True).stdout
        undefined[f] = set()
        for ln in out.splitlines():
            p = ln.split()
            if len(p) < 2:
                continue
            if p[1] == "U":
                undefined[f].add(p[0])
            elif p[1] in "TDBRVWCGS" and p[0] not in defined:
                defined[p[0]] = f
    call_graph, via = {}, {}
    for f, syms in sorted(undefined.items()):
        for s in sorted(syms):
            g = defined.get(s)
            if not g or g == f:
                continue
            n_calls += 1
            call_graph.setdefault(f, set()).add(g)
            via.setdefault((f, g), []).append(s)
    for (f, g), syms in sorted(via.items()):
        a, b = floor(f), floor(g)
        if RANK[b] > RANK[a]:
            errors.append("%s: upward call: floor %s may not call floor %s (%s in %s)"
                          % (f, a, b, ", ".join(syms), g))
    for comp in sccs(call_graph):
        cyc = one_cycle(call_graph, comp)
        text = " -> ".join(cyc) + " (" + "; ".join(
            "%s calls %s" % (a, ", ".join(via[(a, b)][:3])) for a, b in zip(cyc, cyc[1:])) + ")"
        if len(comp) > len(cyc) - 1:
            text += " [component: %s]" % ", ".join(comp)
        errors.append("call cycle: " + text)

for n in notes:
    print("check-layout: " + n)
for e in errors:
    print("check-layout: " + e)
if errors:
    print("check-layout: FAILED, %d problem(s) in %d files, %d includes" % (len(errors), len(files), n_inc))
    sys.exit(1)
print("check-layout: ok, %d files, %d includes%s, floors %s < kernels < server/worker < %s < top"
      % (len(files), n_inc, ", %d calls between daemon files" % n_calls if calls else "",
         " < ".join(CORE_FLOORS), " < ".join(DAEMON_FLOORS)))
PY
