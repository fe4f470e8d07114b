"""Helpers of the eBPF probe cases (cases_probes.py, cases_attach.py)."""

import json

from htlib import check, fail, skip

NOBPF_EXIT = 3  # HT_EXIT_NOBPF: BPF cannot be used here (src/probes/probe.h)


def need_bpf(t, cmd="mmapsnoop"):
    """Skips the case, with heaptrail's own reason, when BPF cannot be used
    here (not root, no BTF, lockdown, built without BPF support...)."""
    r = t.run([t.heaptrail, cmd, "--check"])
    if r.rc == NOBPF_EXIT:
        why = [l.split("cannot use BPF: ", 1)[-1] for l in r.stderr.splitlines()
               if "cannot use BPF" in l]
        skip("BPF cannot be used here: " + ("; ".join(why) or r.stderr.strip()))
    check(r.rc == 0, "heaptrail %s --check: %s" % (cmd, r.describe()))


def probe_json(t, args, timeout=60, rc=0):
    """Runs heaptrail ARGS (which include --json) and returns the document."""
    r = t.run([t.heaptrail] + list(args), timeout=timeout)
    if r.rc == NOBPF_EXIT:
        skip("BPF cannot be used here: " + r.stderr.strip())
    check(r.rc == rc, "expected exit %d: %s" % (rc, r.describe()))
    try:
        return json.loads(r.stdout), r
    except ValueError as e:
        fail("not JSON (%s): %s" % (e, r.describe()))
