// bench/alloc_heavy.js N: an allocation-heavy Node.js workload for
// bench/run_realstacks.sh (Debian's node): N rounds of Buffers of 100..1100
// bytes (malloc'd by node, outside V8's heap) kept in a window of 1000,
// JSON round trips and a zlib compression every 1000 rounds, so that the
// stacks of its mallocs go through V8's JIT code and its builtins, which
// no unwind information covers.
"use strict";
const zlib = require("zlib");
const n = Number(process.argv[2] || 200000);
const window = [];
let total = 0;
for (let i = 0; i < n; i++) {
  const b = Buffer.alloc(100 + (i * 131) % 1000);
  b[0] = i & 0xff;
  window.push(b);
  if (window.length > 1000) total += window.shift().length;
  if (i % 1000 === 0) {
    const s = JSON.stringify({ i, tags: window.slice(0, 20).map((x) => x.length) });
    total += JSON.parse(s).tags.length + zlib.deflateSync(Buffer.from(s)).length;
  }
}
console.log(`rounds=${n} bytes=${total}`);
