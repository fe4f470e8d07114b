"""bench/alloc_heavy.py N: an allocation-heavy Python workload for
bench/run_realstacks.sh (Debian's /usr/bin/python3): N rounds of building
and dropping dicts, lists and byte strings of 16..4096 bytes, so that both
pymalloc's small objects and malloc's larger ones churn, through the
interpreter's deep C call chains."""
import sys


def build(i):
    row = {"id": i, "name": "item%d" % i, "tags": [str(j) for j in range(i % 7)]}
    row["blob"] = b"x" * (16 + (i * 131) % 4080)
    row["text"] = ("%d," % i) * (1 + i % 97)
    row["parts"] = [b"y" * (520 + (i * 37 + j * 101) % 1000) for j in range(6)]
    row["wide"] = list(range(70 + i % 130))
    return row


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    keep = {}
    total = 0
    for i in range(n):
        r = build(i)
        keep[i % 5000] = r
        total += len(r["blob"]) + len(r["text"]) + len(r["wide"])
        if i % 1000 == 0:
            keep = {k: v for k, v in keep.items() if k % 3}
    print("rounds=%d bytes=%d" % (n, total))


main()
