"""bench/gen_csource.py N: a C file of N pairs of functions (about 22 lines
each: loops, switches, calls between them) on stdout, for
bench/run_realstacks.sh to compile with Debian's cc1 -O2: a real program
built without frame pointers that allocates millions of times."""
import sys
n = int(sys.argv[1]) if len(sys.argv) > 1 else 120
out = []
out.append("#include <stddef.h>\nstruct node { int k; long v; struct node *l, *r; double w[4]; };\n")
for i in range(n):
    out.append(f"""
static long f{i}(struct node *p, int n, long acc)
{{
	for (int i = 0; i < n; i++) {{
		switch ((i + {i}) % 7) {{
		case 0: acc += p->k * {i + 3} + i; break;
		case 1: acc ^= (long)p->w[i & 3] * {i % 11 + 1}; break;
		case 2: if (p->l) acc += f{(i + n - 1) % n if i else 0}_helper(p->l, i); break;
		case 3: acc -= p->v >> (i & 15); break;
		case 4: p->w[(i + 1) & 3] += acc * 0.{i % 9 + 1}; break;
		case 5: acc = acc * 31 + {i}; break;
		default: if (p->r) acc += p->r->k; break;
		}}
		if (acc > {1000 + i}) acc /= 3;
	}}
	return acc + {i};
}}""")
out_h = ["#include <stddef.h>\nstruct node { int k; long v; struct node *l, *r; double w[4]; };\n"]
for i in range(n):
    out_h.append(f"static long f{i}_helper(struct node *p, int i) {{ return p->k + i * {i + 1} + (p->l ? p->l->v : 0); }}\n")
body = "".join(out_h) + "".join(out[1:])
body += "\nlong run(struct node *p, int n);\nlong run(struct node *p, int n)\n{\n\tlong a = 0;\n"
for i in range(n):
    body += f"\ta = f{i}(p, n, a);\n"
body += "\treturn a;\n}\n"
sys.stdout.write(body)
