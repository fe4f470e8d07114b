"""heaptrail live and record --live, driven in a real terminal (tmux: a
private server per case, new-session -d, send-keys, capture-pane -p)
against tests/progs/grower.c: grow_site keeps 100000 bytes every 100 ms
(1000000 bytes a second), churn_site frees what it allocates, a second
thread started after 1 s (a new thread for a follower) keeps 1000 bytes
at helper_site every 100 ms, and at DROP_AT every
grown block is freed.  Checks poll the screen for what they expect (up to
a deadline) rather than sleep a fixed time: the machine may be loaded."""

import os
import re
import shutil
import signal
import subprocess
import time

from htlib import case, check, compile_c, eq, fail, skip

GROW = 1000000  # bytes a second at grow_site


class Term:
    """A terminal of 120x40 running cmd, on a tmux server of its own."""

    def __init__(self, t, cmd, w=120, h=40):
        if not shutil.which("tmux"):
            skip("tmux is not installed (scripts/deps.sh test)")
        self.t = t
        self.sock = "ht-%d-%s" % (os.getpid(), t.name)
        env = t.base_env({"TERM": "screen"})
        self.env = env
        # remain-on-exit: the pane stays after the command ends (its last
        # screen can be read, and whether it ended)
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "s", "-x", str(w), "-y", str(h),
                  "-c", t.dir, "sh", "-c", cmd)
        self.tmux("set-option", "-t", "s", "remain-on-exit", "on")

    def tmux(self, *args):
        p = subprocess.run(["tmux", "-L", self.sock] + list(args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=self.env, cwd=self.t.dir, timeout=30)
        return p.stdout.decode("utf-8", "replace")

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "s")

    def history(self):
        """the screen and the lines scrolled off it"""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "s")

    def selected(self):
        """The label of the selected row (in reverse video), or None."""
        for l in self.tmux("capture-pane", "-e", "-p", "-t", "s").splitlines():
            if any("7" in a.split(";") for a in re.findall(r"\x1b\[([0-9;]*)m", l)):
                m = re.match(r"^(\s*[-+ ] \S.*?)\s{2,}\S", re.sub(r"\x1b\[[0-9;]*m", "", l))
                return m and m.group(1).strip()
        return None

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "s", *keys)

    def dead(self):
        return self.tmux("display-message", "-p", "-t", "s", "#{pane_dead}").strip() == "1"

    def wait(self, pred, what, timeout=30):
        """Polls the screen until pred(screen) is true; returns the screen."""
        end = time.monotonic() + timeout
        s = ""
        while time.monotonic() < end:
            s = self.screen()
            if pred(s):
                return s
            time.sleep(0.2)
        fail("the screen did not show %s within %ss; it shows:\n%s" % (what, timeout, s))

    def wait_text(self, text, timeout=30):
        return self.wait(lambda s: text in s, repr(text), timeout)

    def wait_history(self, text, timeout):
        """Polls the history (history()) until it holds text, for at most
        timeout seconds; the caller checks what it then holds."""
        end = time.monotonic() + timeout
        while text not in self.history() and time.monotonic() < end:
            time.sleep(0.2)

    def close(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)


def table_rows(screen):
    """The table's rows: (label, [column texts]) below its header line."""
    lines = screen.splitlines()
    for i, l in enumerate(lines):
        if l.startswith("function / callers") or l.startswith("size class / thread"):
            rows = []
            for r in lines[i + 1:]:
                m = re.match(r"^(\s*[-+ ] \S.*?)\s{2,}(\S.*)$", r)
                if not m or r.startswith("q quit"):
                    break
                cols = re.findall(r"\S+(?: [KMG]?i?B)?", m.group(2))
                rows.append((m.group(1).strip(), cols))
            return rows
    return []


def bytes_of(text):
    m = re.match(r"([\d.]+) (B|KiB|MiB|GiB)$", text)
    check(m, "not a byte count: %r" % text)
    return float(m.group(1)) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)]


def first_row(screen):
    rows = table_rows(screen)
    return rows[0] if rows else ("", [])


def grow_first(screen):
    return first_row(screen)[0].endswith("grow_site")


def record_bg(t, out, args, secs):
    """Starts record in the background; returns the Popen."""
    cmd = [t.heaptrail, "record", "-q", "-o", out] + list(args) + ["--", t.prog("grower"), str(secs)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=t.base_env(), cwd=t.dir)


def wait_file(path, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return
        time.sleep(0.05)
    fail("no trace at %s" % path)


@case(timeout=120, labels=("live",))
def test_live_follows_growth(t):
    """heaptrail live on a trace being written: grow_site comes first and
    its live bytes grow by about 1 MB a second; the trace is said to be
    still being written; q leaves and the recording goes on to a complete
    trace."""
    out = t.path("g.ht")
    rec = record_bg(t, out, ["--stacks"], 12)
    try:
        wait_file(out)
        term = Term(t, "%s live g.ht" % t.heaptrail)
        try:
            s0 = term.wait(grow_first, "grow_site as the first row")
            check("still being written" in s0.splitlines()[0], "header:\n" + s0)
            # the header's fields
            for pat in (r"^heaptrail live  pid \d+  \S*grower 12  \[running",
                        r"^time [\d.]+s \(program at [\d.]+s\)  threads [12]  events \S+  "
                        r"recording on$",
                        r"^heap now [\d.]+ \S+ requested, [\d.]+ \S+ usable, \d+ blocks   "
                        r"peak [\d.]+ \S+ at [\d.]+s   RSS [\d.]+ \S+$",
                        r"^allocations \S+/s  frees \S+/s   allocated [\d.]+ \S+ in \S+ calls$"):
                check(re.search(pat, s0, re.M), "no %r in the header:\n%s" % (pat, s0))
            b0 = bytes_of(first_row(s0)[1][0])
            t0 = time.monotonic()
            s = term.wait(lambda x: grow_first(x) and bytes_of(first_row(x)[1][0]) >= b0 + 1.5 * GROW,
                          "grow_site's bytes growing", timeout=20)
            rate = (bytes_of(first_row(s)[1][0]) - b0) / (time.monotonic() - t0)
            # grower makes 1010 allocations a second (1020 with its helper)
            m = re.search(r"^allocations (\d+)/s  frees (\d+)/s", s, re.M)
            check(m and 700 < int(m.group(1)) < 1400 and 700 < int(m.group(2)) < 1400,
                  "rates:\n" + s)
            # the strip: live bytes (#) and RSS (-)
            lines = s.splitlines()
            i = next(k for k, l in enumerate(lines) if "heap over time" in l)
            strip = "".join(l[10:] for l in lines[i - 4:i])
            check("#" in strip and "-" in strip, "the strip lacks live bytes or RSS:\n" + s)
            # (the display is up to a redraw and a flush round behind: a
            # wide margin on a loaded machine)
            check(0.3 * GROW < rate < 4 * GROW, "grow_site grew %.0f bytes/s; screens:\n%s\n%s"
                  % (rate, s0, s))
            # what is shown is less than a second behind the program
            lags = []
            for _ in range(5):
                m = re.search(r"^time ([\d.]+)s \(program at ([\d.]+)s\)", term.screen(), re.M)
                if m:
                    lags.append(float(m.group(2)) - float(m.group(1)))
                time.sleep(0.3)
            check(lags and min(lags) < 1.0, "the display's lag behind the program: %r" % lags)
            # p holds the screen still (the events read stay), p again reads on
            term.keys("p")
            s = term.wait_text("display paused")

            def events(x):
                m = re.search(r"^time .* events (\S+)", x, re.M)
                return m and m.group(1)
            time.sleep(1.5)
            s1 = term.screen()
            eq(events(s1), events(s), "events read while paused")
            term.keys("p")
            term.wait(lambda x: events(x) != events(s), "the display reading on after p")
            # the helper thread's site is there too, and the threads view
            check(any(r[0].endswith("helper_site") for r in table_rows(s)), s)
            term.keys("t")
            s = term.wait_text("cross frees")
            check(len([l for l in s.splitlines() if re.match(r"^\d+ ", l)]) >= 2, s)
            term.keys("q")
            term.wait(lambda x: term.dead(), "live ending", timeout=10)
        finally:
            term.close()
        check(rec.poll() is None, "the recording ended with the display")
    finally:
        _, err = rec.communicate(timeout=60)
    eq(rec.returncode, 0, "record: " + err.decode())
    s = t.stats(out)
    check(s["closed"] and s["complete"], "the trace is complete")
    eq(s["calls"]["malloc"], 120 * 101 + 110, "malloc calls")


@case(timeout=120, labels=("live",))
def test_live_record_live(t):
    """record --live: the display in the foreground, the program's output
    in OUTPUT.out (named on the screen); q leaves the display, the program
    goes on, and its trace equals one recorded without --live."""
    term = Term(t, "%s record --live --stacks -o l.ht -- %s 4; echo RECORD-EXIT=$?" % (
        t.heaptrail, t.prog("grower")))
    try:
        s = term.wait(grow_first, "grow_site first")
        check("program output: %s" % t.path("l.ht.out") in s, s)
        check("still being written" in s, s)
        term.keys("q")
        s = term.wait_text("goes on; its trace goes to", timeout=10)
        s = term.wait_text("RECORD-EXIT=0", timeout=30)
        check("wrote" in s, s)
    finally:
        term.close()
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", t.path("plain.ht"), "--",
           t.prog("grower"), "4"], check_rc=0)
    live, plain = t.stats(t.path("l.ht")), t.stats(t.path("plain.ht"))
    for k in ("events", "calls", "bytes_allocated", "live_bytes_at_exit", "closed", "complete",
              "free_null", "thread_starts"):
        eq(live[k], plain[k], k + " with and without --live")
    check(os.path.exists(t.path("l.ht.out")), "no l.ht.out")


@case(timeout=120, labels=("live",))
def test_live_keys(t):
    """Each key of the status line on a finished trace: help, sort, open,
    mode, threads, classes, search, pause, time cursor, snapshot, the
    recording switch (over), quit."""
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", t.path("k.ht"), "--",
           t.prog("grower"), "3"], check_rc=0)
    term = Term(t, "%s live k.ht" % t.heaptrail)
    try:
        s = term.wait_text("[finished]")
        status = s.splitlines()[-1]
        for k in ("q quit", "Enter open", "s sort", "m mode", "t threads", "c classes",
                  "/ search", "p pause", "w/W snapshot", "r rec on/off", "<> time", "? help"):
            check(k in status, "status line lacks %r: %r" % (k, status))
        term.keys("?")
        s = term.wait_text("toggle recording")
        term.keys("x")
        term.wait_text("*own")
        term.keys("s")
        term.wait_text("*total")
        term.keys("S")
        term.wait_text("*own")
        # back in time: grow_site holds 1.5 s worth at 1.5 s, twenty steps
        # of a fortieth of the run; the header shows the cursor's time (it
        # showed the step before when a step moved the cursor between two
        # events).  The keys take a while to get through on a busy machine:
        # the screen is read once it shows that time
        dur = t.stats(t.path("k.ht"))["duration_ns"]
        at = "time %.1fs (cursor)" % (20 * (dur // 40) / 1e9)
        term.keys("Home")
        for _ in range(20):
            term.keys(">")
        s = term.wait(lambda x: grow_first(x) and at in x, "grow_site first, " + at)
        b = bytes_of(first_row(s)[1][0])
        check(0.8 * GROW <= b <= 3.1 * GROW, "grow_site at the cursor: %r" % (first_row(s),))
        # the selection stays on its row (calloc's, the only one at the end):
        # up to the first
        for _ in range(5):
            term.keys("k")
        term.keys("Enter")
        s = term.wait(lambda x: first_row(x)[0].startswith("- grow_site"), "grow_site open")
        rows = table_rows(s)
        check(len(rows) > 1 and "main" in rows[1][0] and "grower.c" in rows[1][0],
              "a caller under grow_site: %r" % rows[:3])

        def labels(x):
            return [r[0] for r in table_rows(x)]
        # Enter again closes it; j selects the next row, space opens and
        # closes it; + and - too; PgDn selects the last row, PgUp the
        # first (rows at 1.5 s: grow_site, helper_site, calloc, then the
        # functions that only call them)
        term.keys("Enter")
        term.wait(lambda x: labels(x)[:1] == ["+ grow_site"], "grow_site closed")
        term.keys("j")
        term.wait(lambda x: term.selected() == "+ helper_site", "helper_site selected")
        term.keys("Space")
        term.wait(lambda x: labels(x)[:2] == ["+ grow_site", "- helper_site"], "helper_site open")
        term.keys("Space")
        term.wait(lambda x: labels(x)[:3] == ["+ grow_site", "+ helper_site", "+ calloc"],
                  "helper_site closed")
        term.keys("Down", "+")
        term.wait(lambda x: labels(x)[2:3] == ["- calloc"], "calloc open")
        term.keys("-")
        term.wait(lambda x: labels(x)[:3] == ["+ grow_site", "+ helper_site", "+ calloc"],
                  "calloc closed")
        # s sorts by each column in turn: the rows (all closed) come in
        # that column's order, biggest first; S goes back one
        def value(text):
            if text.endswith("B"):
                return bytes_of(text)
            m = re.match(r"([\d.]+)([KMG]?)$", text)
            return float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]

        def sorted_by(name):
            return lambda x: re.search(r"sort: %s\s*$" % name, x, re.M) and "*" + name in x
        names = ["own", "total", "blocks", "allocs", "bytes alloc"]
        for k in (1, 2, 3, 4, 0):
            term.keys("s")
            s = term.wait(sorted_by(names[k]), "sorted by " + names[k])
            vals = [value(r[1][k]) for r in table_rows(s)]
            check(len(vals) > 3 and vals == sorted(vals, reverse=True),
                  "sorted by %s: %r\n%s" % (names[k], vals, s))
        term.keys("S")
        term.wait(sorted_by("bytes alloc"), "S: sorted by bytes alloc")
        term.keys("s")
        term.wait(lambda x: sorted_by("own")(x) and labels(x)[:3] == ["+ grow_site",
                  "+ helper_site", "+ calloc"], "sorted by own again")
        term.keys("PgDn")
        s = term.wait(lambda x: len(labels(x)) > 3 and term.selected() == labels(x)[-1],
                      "the last row selected")
        term.keys("Up")
        term.wait(lambda x: term.selected() == labels(x)[-2], "the row before the last selected")
        # the functions that allocate nothing themselves: main holds
        # grow_site's bytes in total, nothing of its own
        mrow = [r for r in table_rows(s) if r[0] == "main"]
        check(mrow and mrow[0][1][0] == "0 B" and mrow[0][1][1] == first_row(s)[1][1],
              "main: nothing of its own, grow_site's in total: %r" % mrow)
        term.keys("PgUp")
        term.wait(lambda x: term.selected() == "+ grow_site", "the first row selected")
        term.keys("Enter")
        term.wait(lambda x: labels(x)[:1] == ["- grow_site"], "grow_site open again")
        term.keys("m")
        term.wait_text("at the peak, by")
        term.keys("m")
        term.wait_text("allocated since start, by")
        term.keys("m")
        term.wait_text("live now, by")
        term.keys("c")
        s = term.wait_text("by size class and thread")
        check(any(".." in r[0] for r in table_rows(s)), s)
        term.keys("c")
        term.wait_text("by allocating function")
        term.keys("/", "helper", "Enter")
        s = term.wait_text("search: helper")
        found = labels(s)
        check(found[:1] == ["+ helper_site"] and not any("grow_site" in l or l == "main"
                                                          for l in found),
              "search keeps helper_site's stacks only: %r" % found)
        term.keys("/", "Enter")
        term.wait(grow_first, "all functions again")
        # Esc leaves the search as it was
        term.keys("/", "zzz", "Escape")
        term.keys("m")
        s = term.wait_text("at the peak, by")
        check("search: zzz" not in s and grow_first(s), "Esc applied the search:\n" + s)
        term.keys("m", "m")
        term.wait_text("live now, by")
        term.keys("t")
        term.wait_text("cross frees")
        term.keys("t")
        term.keys("p")
        term.wait_text("display paused")
        term.keys("p")
        term.wait_text("display resumed")
        term.keys("w")
        s = term.wait_text("snapshot written to")
        m = re.search(r"snapshot written to (\S+)", s)
        with open(os.path.join(t.dir, m.group(1))) as f:
            snap = f.read()
        check("grow_site" in snap and "bytes in" in snap, snap[:2000])
        # W: the HTML report is of the whole trace so far, not of the cursor
        term.keys("W")
        term.wait_text("W reports the whole trace so far: End first")
        term.keys("r")
        term.wait_text("the recording is over")
        term.keys("End")
        s = term.wait(lambda x: "(cursor)" not in x.splitlines()[1], "the end again")
        term.keys("W")
        s = term.wait_text("report of the trace so far being written to")
        html = os.path.join(t.dir, re.search(r"being written to (\S+)", s).group(1))
        end = time.monotonic() + 30
        while not os.path.exists(html) and time.monotonic() < end:
            time.sleep(0.2)
        with open(html) as f:
            page = f.read()
        check(page.startswith("<!DOCTYPE html>") and "grow_site" in page and "</html>" in page,
              page[:500])
        # < steps back a fortieth of the run from the end
        term.keys("<")
        at = "time %.1fs (cursor)" % ((dur - dur // 40) / 1e9)
        term.wait_text(at)
        # and the arrows: left steps back, right forward
        term.keys("Left")
        term.wait_text("time %.1fs (cursor)" % ((dur - 2 * (dur // 40)) / 1e9))
        term.keys("Right")
        term.wait_text(at)
        term.keys("End")
        term.wait(lambda x: "(cursor)" not in x.splitlines()[1], "the end again")
        # a smaller terminal: the screen is drawn again to its size
        term.tmux("resize-window", "-t", "s", "-x", "90", "-y", "20")
        term.wait(lambda x: len(x.splitlines()) == 20 and max(len(l) for l in x.splitlines()) <= 90
                  and "heap over time" in x and x.splitlines()[-1].startswith("q quit"),
                  "the screen redrawn at 90x20")
        term.keys("q")
        term.wait(lambda x: term.dead(), "live ending", timeout=10)
    finally:
        term.close()


@case(timeout=120, labels=("live",))
def test_live_phase_strip(t):
    """A phase change shows on the strip: the grown blocks are freed at 2 s
    of 4: the columns before are taller than those after."""
    t.run([t.heaptrail, "record", "-q", "-o", t.path("p.ht"), "--", t.prog("grower"), "4",
           "2"], check_rc=0)
    r = t.run([t.heaptrail, "live", "--batch", "--width", "110", "p.ht"], check_rc=0)
    lines = r.stdout.splitlines()
    i = next(k for k, l in enumerate(lines) if "heap over time" in l)
    strip = lines[i - 4:i]
    x0 = 10

    def height(col):
        """half rows: '#' a whole one, '.' a half"""
        return sum(2 if l[col:col + 1] == "#" else l[col:col + 1] == "." for l in strip)
    w = len(lines[i]) - x0
    h = [height(x0 + k) for k in range(w)]
    # (the strip's scale is the larger of the live bytes and the RSS, whose
    # file pages vary with what the page cache holds: the live bytes' peak
    # reads 5 or 6 half rows of 8)
    drops = [k for k in range(int(w * 0.3), int(w * 0.8)) if h[k - 1] >= 4 and h[k] <= 2]
    check(drops and max(h[:drops[0]]) >= 5, "no drop in the strip's middle (heights %r):\n%s"
          % (h, "\n".join(lines[i - 4:i + 1])))
    # without --stacks the table is by size class, opening onto threads
    check("live now, by size class and thread" in r.stdout, r.stdout)
    r2 = t.run([t.heaptrail, "live", "--batch", "--keys", "\n", "p.ht"], check_rc=0)
    rows = table_rows(r2.stdout)
    check(len(rows) > 1 and rows[0][0].startswith("- ") and ".." in rows[0][0]
          and rows[1][0].startswith("thread "), "a size class open onto its threads: %r" % rows)
    # and the model agrees with stats on the finished trace
    s = t.stats(t.path("p.ht"))
    m = re.search(r"events (\S+)", lines[1])
    eq(m.group(1), str(s["events"]) if s["events"] < 10000 else m.group(1), "events")


@case(timeout=180, labels=("live",))
def test_live_follow_exact(t):
    """live --batch follows a trace while it is written (threads, then with
    --sample-bytes): what it shows at the end equals what it shows of the
    finished trace, event for event."""
    for extra in (["--stacks"], ["--sample-bytes", "4096"]):
        out = t.path("f.ht")
        if os.path.exists(out):
            os.unlink(out)
        rec = record_bg(t, out, extra, 3)
        wait_file(out)
        follow = t.run([t.heaptrail, "live", "--batch", "f.ht"], timeout=60, check_rc=0)
        _, err = rec.communicate(timeout=60)
        eq(rec.returncode, 0, "record: " + err.decode())
        done = t.run([t.heaptrail, "live", "--batch", "f.ht"], check_rc=0)
        a, b = follow.stdout.splitlines(), done.stdout.splitlines()
        check("still being written" not in a[0], a[0])
        eq(len(a), len(b), "lines")
        for k in range(len(b)):
            if k in range(4, 9):
                continue  # the strip: its columns depend on the clock fit
            # the follower fitted the clock on the run so far, the finished
            # reader on the whole run: times may differ in the last digit;
            # the rates of the last tick differ (the follower ticked along)
            x, y = (re.sub(r"[\d.]+s\b", "T", re.sub(r"^allocations \S+  frees \S+", "", l))
                    for l in (a[k], b[k]))
            eq(x, y, "line %d of the followed and the finished screen (%s)" % (k, extra))


@case(timeout=60, labels=("live",))
def test_live_being_written(t):
    """Readers of a trace whose writer is alive say "still being written"."""
    out = t.path("w.ht")
    rec = record_bg(t, out, [], 4)
    try:
        wait_file(out)
        time.sleep(0.5)
        for cmd in (["stats"], ["leaks"], ["top"], ["dump"], ["timeline", "-o", t.path("w.svg")],
                    ["report", "-o", t.path("w.html")]):
            r = t.run([t.heaptrail] + cmd + [out])
            text = r.stdout + r.stderr
            check("still being written" in text and "not closed cleanly" not in text
                  and "killed" not in text, "%s: %s" % (cmd[0], text))
    finally:
        rec.communicate(timeout=60)


@case(timeout=120, labels=("live",))
def test_live_follow_partial_chunks(t):
    """The trace layer's follow mode on a file that grows under a lock this
    test holds: written in three steps each cut inside a chunk (the second
    thread's first chunk comes in a later step), the last one completing
    the file.  The follower waits for the cut chunks instead of calling
    them damage, takes the new thread, and ends with the screen of the
    whole file read at once."""
    import fcntl
    import struct
    import htformat
    src = t.path("src.ht")
    t.run([t.heaptrail, "record", "-q", "--no-compact", "-o", src, "--", t.prog("grower"), "2"],
          check_rc=0)
    data = open(src, "rb").read()
    tr = htformat.Trace(src)
    chunks = htformat.chunk_headers(data, tr.sections[htformat.SEC_CHUNKS][0])
    check(len(chunks) > 10, "chunks: %d" % len(chunks))
    tids = []
    for off, h in chunks:
        if h[3] and h[3] not in tids:
            tids.append(h[3])
    check(len(tids) == 2, "two threads: %r" % tids)
    second = next(off for off, h in chunks if h[3] == tids[1])
    # cuts: inside the first chunk after a third of the file (before the
    # second thread's first chunk), inside the second thread's first chunk,
    # inside a chunk two thirds in
    def inside(off):
        return off + htformat.CHUNK.size + 3
    third = next((off for off, h in chunks if len(data) // 3 < off < second), chunks[2][0])
    cuts = sorted({inside(third), inside(second),
                   inside(next(off for off, h in chunks if off > 2 * len(data) // 3))})
    # the header as a recorder leaves it while it writes: not closed, its
    # pid alive (this test's: the follower sees a running writer)
    head = bytearray(data[:tr.sections[htformat.SEC_CHUNKS][0]])
    flags = struct.unpack_from("<Q", head, 16)[0]
    struct.pack_into("<Q", head, 16, flags & ~htformat.FILE_F_CLOSED)
    struct.pack_into("<i", head, 24, os.getpid())
    dst = t.path("grow.ht")
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, bytes(head) + data[len(head):cuts[0]])
    follower = subprocess.Popen([t.heaptrail, "live", "--batch", dst], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=t.base_env(), cwd=t.dir)
    try:
        for a, b in zip(cuts, cuts[1:] + [len(data)]):
            time.sleep(0.7)
            check(follower.poll() is None, "the follower ended before the file did")
            os.write(fd, data[a:b])
        time.sleep(0.5)
        os.pwrite(fd, data[:len(head)], 0)  # the header as closed
    finally:
        os.close(fd)  # the lock goes: the writer is done
    out, err = follower.communicate(timeout=60)
    eq(follower.returncode, 0, "live --batch: " + err.decode())
    check(b"offset" not in err and b"truncated" not in err, err.decode())
    whole = t.run([t.heaptrail, "live", "--batch", src], check_rc=0)
    a, b = out.decode().splitlines(), whole.stdout.splitlines()
    eq(len(a), len(b), "lines")
    for k in range(1, len(b)):  # (line 0 names the file's pid)
        if k in range(4, 9):
            continue
        x, y = (re.sub(r"[\d.]+s\b", "T", re.sub(r"^allocations \S+  frees \S+", "", l))
                for l in (a[k], b[k]))
        eq(x, y, "line %d of the followed and the whole file's screen" % k)


@case(timeout=120, labels=("live",))
def test_live_toggle_recording(t):
    """r switches recording off and on (SIGUSR2, the switch of
    --toggle-signal, which record --live sets): the header follows the
    recorder's control events, and the trace misses the calls made while
    it was off."""
    term = Term(t, "%s record --live --stacks -o r.ht -- %s 6; echo RECORD-EXIT=$?" % (
        t.heaptrail, t.prog("grower")))
    try:
        term.wait(grow_first, "grow_site first")
        term.keys("r")
        term.wait_text("recording paused", timeout=15)
        time.sleep(0.5)
        term.keys("r")
        term.wait_text("recording on", timeout=15)
        term.keys("q")
        term.wait_text("RECORD-EXIT=0", timeout=40)
    finally:
        term.close()
    s = t.stats(t.path("r.ht"))
    check(s["calls"]["malloc"] < 60 * 101 + 50, "calls while recording was off are not in the "
          "trace: %d mallocs" % s["calls"]["malloc"])


@case(timeout=120, labels=("live",))
def test_live_ctrl_c(t):
    """Ctrl-C in record --live goes to the program, as without heaptrail:
    it ends (SIGINT), the display shows the trace finished, q leaves and
    record ends with the program's status."""
    term = Term(t, "%s record --live --stacks -o c.ht -- %s 60; echo RECORD-EXIT=$?" % (
        t.heaptrail, t.prog("grower")))
    try:
        term.wait(grow_first, "grow_site first")
        term.keys("C-c")
        term.wait(lambda s: "[finished" in s.splitlines()[0], "the trace finished", timeout=30)
        term.keys("q")
        # (the shell may die of the SIGINT as well, before its echo)
        term.wait_history("killed by signal 2", 30)
        check("killed by signal 2 (Interrupt); wrote" in term.history(), term.history())
    finally:
        term.close()
    s = t.stats(t.path("c.ht"))
    check(s["closed"], "the trace is closed")


@case(timeout=120, labels=("live",))
def test_live_modes_values(t):
    """The three counts of the table on grower 3 2 (30 ticks, the grown
    blocks freed at tick 20): at the peak (just before the drop) grow_site
    holds 20 blocks of 100000 bytes after 20 allocations; since the start
    it allocated 30; at the end it holds nothing (the row is gone)."""
    t.run([t.heaptrail, "record", "-q", "--stacks", "-o", t.path("m.ht"), "--", t.prog("grower"),
           "3", "2"], check_rc=0)

    def rows(keys):
        r = t.run([t.heaptrail, "live", "--batch", "--keys", keys, "m.ht"], check_rc=0)
        return {l.strip(): c for l, c in table_rows(r.stdout)}, r.stdout
    peak, out = rows("m")
    check("at the peak, by" in out, out)
    g = peak.get("+ grow_site")
    check(g is not None, out)
    eq(g[2:4], ["20", "20"], "grow_site's blocks and allocations at the peak")
    eq(bytes_of(g[1]), bytes_of("1.91 MiB"), "grow_site's bytes at the peak")
    alloc, out = rows("mm")
    g = alloc.get("+ grow_site")
    check(g is not None and "allocated since start, by" in out, out)
    eq(g[2:4], ["30", "30"], "grow_site's allocations since the start")
    eq(bytes_of(g[4]), bytes_of("2.86 MiB"), "grow_site's bytes allocated")
    now, out = rows("")
    check("+ grow_site" not in now, "nothing of grow_site is live at the end:\n" + out)
    # the threads view: the helper thread made 20 allocations and freed
    # nothing; main freed its 20 blocks at the end (cross-thread frees)
    r = t.run([t.heaptrail, "live", "--batch", "--keys", "t", "m.ht"], check_rc=0)
    thr = [l.split() for l in r.stdout.splitlines() if re.match(r"^\d+ ", l)]
    eq(len(thr), 2, "threads:\n" + r.stdout)
    eq(thr[1][-3:], ["20", "0", "0"], "the helper thread's allocs, frees, cross frees")
    eq(thr[1][1:4], ["0", "B", "0"], "the helper thread's live bytes and blocks")
    eq(thr[0][-1], "20", "main's frees of the helper's blocks")


@case(timeout=120, labels=("live",))
def test_live_terminal_gone(t):
    """The terminal of record --live goes away (its tmux server killed:
    the pane's terminal hangs up): the display ends instead of spinning on
    reads that fail at once, record waits for its program as without
    --live and ends with it, and the trace is whole.  (Before: record
    spun at full CPU for ever after its program ended.)"""
    out = t.path("gone.ht")
    term = Term(t, "%s record --live --stacks -o %s -- %s 3" % (t.heaptrail, out, t.prog("grower")))
    try:
        term.wait(grow_first, "grow_site first")
    finally:
        term.close()
    end = time.monotonic() + 30
    pids = []
    while time.monotonic() < end:
        p = subprocess.run(["pgrep", "-f", "record --live --stacks -o " + out], stdout=subprocess.PIPE)
        pids = p.stdout.split()
        if not pids:
            break
        time.sleep(0.5)
    if pids:
        subprocess.run(["pkill", "-9", "-f", "record --live --stacks -o " + out])
        fail("record --live still runs 30 s after its terminal went away (pids %s)" % pids)
    s = t.stats(out)
    eq((s["closed"], s["complete"]), (True, True), "the trace is closed and complete")
    check(s["calls"]["malloc"] > 0, "no malloc in the trace")


@case(timeout=120, labels=("live",))
def test_live_forks(t):
    """record --live on a program that forks (forktree: the parent's thread
    makes 20000 malloc/free pairs, three children and grandchildren a few
    each, one trace per process): the display follows the trace it was
    given, the parent's, and none of the children's events mix in; each
    child's trace is read on its own."""
    term = Term(t, "%s record --live --stacks -o f.ht -- %s; echo RECORD-EXIT=$?" % (
        t.heaptrail, t.prog("forktree")))
    try:
        s = term.wait(lambda x: "[finished" in x.splitlines()[0], "the trace finished", timeout=60)
        term.keys("q")
        term.wait_text("RECORD-EXIT=0", timeout=30)
    finally:
        term.close()
    st = t.stats(t.path("f.ht"))
    check("pid %d " % st["pid"] in s.splitlines()[0], s)
    m = re.search(r"allocated \S+ \S+ in (\S+) calls", s)
    allocs = sum(st["calls"][k] for k in ("malloc", "calloc", "realloc"))
    check(m and m.group(1) == "%.1fK" % (allocs / 1000), "the parent's %d allocations:\n%s"
          % (allocs, s))
    kids = [f for f in os.listdir(t.dir) if re.match(r"f\.ht\.\d+$", f)]
    eq(len(kids), 6, "children's traces: %r" % kids)
    # the program's output went to f.ht.out, not over the display
    with open(t.path("f.ht.out")) as f:
        said = f.read()
    check(sorted(re.findall(r"^(?:grand)?child \d: (\d+)$", said, re.M))
          == sorted(k.split(".")[-1] for k in kids), "f.ht.out: %r, traces %r" % (said, kids))
    r = t.run([t.heaptrail, "live", "--batch", kids[0]], check_rc=0)
    check("pid %s " % kids[0].split(".")[-1] in r.stdout.splitlines()[0], r.stdout)


@case(timeout=180, labels=("live",))
def test_live_rss_samples_bounded(t):
    """The clock and RSS samples a follower keeps are bounded (8192,
    thinned evenly over the run), not one per RSS interval of the run:
    live --batch follows grower 14 recorded with --rss-interval 1ms (about
    14000 samples) and keeps between 4096 and 8192; the header and the
    strip still show the RSS."""
    import struct
    import htformat
    out = t.path("rss.ht")
    rec = record_bg(t, out, ["--no-compact", "--rss-interval", "1ms"], 14)
    wait_file(out)
    follow = t.run([t.heaptrail, "live", "--batch", "rss.ht"], timeout=120, check_rc=0)
    _, err = rec.communicate(timeout=60)
    eq(rec.returncode, 0, "record: " + err.decode())
    data = open(out, "rb").read()
    tr = htformat.Trace(out)
    rss = []
    for off, h in htformat.chunk_headers(data, tr.sections[htformat.SEC_CHUNKS][0]):
        if h[1] == htformat.CHUNK_CLOCK:
            for k in range(h[5] // 24):
                v = struct.unpack_from("<Q", data, off + htformat.CHUNK.size + 24 * k + 16)[0]
                if v:
                    rss.append(v)
    m = re.search(r"; (\d+) RSS samples kept", follow.stderr)
    check(m, follow.stderr)
    kept = int(m.group(1))
    check(kept <= 8192 and kept <= len(rss), "%d RSS samples kept of %d" % (kept, len(rss)))
    if len(rss) > 10000:
        check(kept >= 4096, "%d RSS samples kept of %d" % (kept, len(rss)))
    # the header's RSS is one of the last second's samples, and the strip
    # draws the series
    hm = re.search(r"RSS ([\d.]+ \S+)$", follow.stdout.splitlines()[2])
    check(hm and any(abs(bytes_of(hm.group(1)) - v * 1024) <= 0.01 * v * 1024
                     for v in rss[-1000:]),
          "the header's RSS is none of the last second's samples (%r KiB):\n%s"
          % (sorted(set(rss[-1000:])), follow.stdout))
    lines = follow.stdout.splitlines()
    i = next(k for k, l in enumerate(lines) if "heap over time" in l)
    check("-" in "".join(l[10:] for l in lines[i - 4:i]), follow.stdout)


@case(timeout=120, labels=("live",))
def test_live_idle_time_passes(t):
    """A program that allocates nothing for a while (sh -c 'sleep 6'):
    the time shown goes on with the program's (it stood at the last
    event's, 0.0s, with the rates of then), the rates fall to 0, and the
    finished trace shows its whole duration."""
    term = Term(t, "%s record --live -o i.ht -- sh -c 'sleep 6; true'; echo RECORD-EXIT=$?"
                % t.heaptrail)
    try:
        def times(x):
            m = re.search(r"^time ([\d.]+)s \(program at ([\d.]+)s\)", x, re.M)
            return m and (float(m.group(1)), float(m.group(2)))
        s = term.wait(lambda x: times(x) and times(x)[1] >= 3, "the program at 3 s")
        shown, prog = times(s)
        check(prog - shown < 1.0, "the time shown lags the program's by more than 1 s:\n" + s)
        check(re.search(r"^allocations 0/s  frees 0/s", s, re.M), "rates while idle:\n" + s)
        s = term.wait(lambda x: "[finished" in x.splitlines()[0], "the trace finished")
        m = re.search(r"^time ([\d.]+)s ", s, re.M)
        dur = t.stats(t.path("i.ht"))["duration_ns"] / 1e9
        check(m and abs(float(m.group(1)) - dur) < 0.15, "the finished trace's time is not its "
              "duration (%.2f s):\n%s" % (dur, s))
        term.keys("q")
        term.wait_text("RECORD-EXIT=0", timeout=30)
    finally:
        term.close()


@case(timeout=120, labels=("live",))
def test_live_follows_exec(t):
    """record --live on a wrapper script that runs a while, then execs the
    program (as a pyenv shim or a start script does): the trace of the
    script's image is closed and renamed OUTPUT.exec1, the program's image
    writes OUTPUT again, and the display follows it there (it stayed on
    the script's finished trace), its status line naming x.ht.exec1."""
    script = t.path("wrap.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nsleep 1.5\nexec %s \"$@\"\n" % t.prog("grower"))
    os.chmod(script, 0o755)
    term = Term(t, "%s record --live --stacks -o x.ht -- %s 4; echo RECORD-EXIT=$?" % (
        t.heaptrail, script))
    try:
        # the status line names the trace before by its name (it said
        # "x.ht.exec<N>")
        term.wait_text("exec'd (the trace before is x.ht.exec1): following ", timeout=30)
        s = term.wait(lambda x: grow_first(x) and "grower 4  [running" in x.splitlines()[0],
                      "the exec'd program's trace followed")
        term.keys("q")
        term.wait_text("RECORD-EXIT=0", timeout=30)
    finally:
        term.close()
    check(os.path.exists(t.path("x.ht.exec1")), "no x.ht.exec1: %r" % os.listdir(t.dir))
    r = t.run([t.heaptrail, "live", "--batch", "x.ht.exec1"], check_rc=0)
    check("wrap.sh" in r.stdout.splitlines()[0], r.stdout)
    # a long command is cut short in the header, not the state
    r = t.run([t.heaptrail, "live", "--batch", "--width", "70", "x.ht.exec1"], check_rc=0)
    head = r.stdout.splitlines()[0]
    check(head.endswith("...  [finished]") and len(head) <= 70, head)


@case(timeout=60, labels=("live",))
def test_live_trace_removed(t):
    """The trace shown is removed, then Home asks to read it again from
    its start: the display says it cannot and keeps what it showed (it
    crashed on the reader it had closed), q ends it with status 0."""
    t.run([t.heaptrail, "record", "-q", "-o", t.path("d.ht"), "--", t.prog("grower"), "1"],
          check_rc=0)
    term = Term(t, "%s live d.ht; echo LIVE-EXIT=$?" % t.heaptrail)
    try:
        term.wait_text("[finished]")
        os.unlink(t.path("d.ht"))
        term.keys("Home")
        s = term.wait_text("cannot open")
        check(s.splitlines()[0].startswith("heaptrail live  pid"), s)
        term.keys("q")
        term.wait_history("LIVE-EXIT", 10)
        # (read from the history: the line may come out above the restored
        # screen's top)
        check("LIVE-EXIT=0" in term.history(), term.history())
    finally:
        term.close()




# 5000 blocks kept at once, 2 s of nothing, 700 malloc/free pairs, 2 s of
# nothing: the rates of a finished trace depend on the moment shown.
BURSTS_C = r"""
#include <stdlib.h>
#include <unistd.h>
int main(void)
{
	static void *keep[5000];
	for (int i = 0; i < 5000; i++)
		keep[i] = malloc(16);
	usleep(2000000);
	for (int i = 0; i < 700; i++) {
		void *volatile p = malloc(32);
		free(p);
	}
	usleep(2000000);
	return keep[0] == NULL;
}
"""


def rates_of(out, what):
    """(allocations/s, frees/s) of live's header."""
    m = re.search(r"allocations (\S+)/s  frees (\S+)/s", out)
    check(m, "no rates in %s:\n%s" % (what, out))
    return tuple(float(x) for x in m.groups())


@case(timeout=120, labels=("live",))
def test_live_rates_finished(t):
    """A finished trace's rates are those of the second before the moment
    shown, as while it is followed (docs/live.md): at the end of the bursts
    program (its last calls 2 s before) 0/s, in the threads view too; at
    --at 2.5s the 700 pairs of 2.0 s, over the window of about a second
    (0.94 to 1.07 s: 652 to 746 a second).  Before, the rates were averaged
    since the start: 1425 allocations/s at the end, 2280/s at 2.5 s."""
    exe = compile_c(t, "bursts", BURSTS_C)
    t.run([t.heaptrail, "record", "-q", "-o", t.path("b.ht"), "--", exe], check_rc=0)
    r = t.run([t.heaptrail, "live", "--batch", "b.ht"], check_rc=0)
    eq(rates_of(r.stdout, "the end"), (0, 0), "rates at the end")
    r = t.run([t.heaptrail, "live", "--batch", "--keys", "t", "b.ht"], check_rc=0)
    thr = [l.split() for l in r.stdout.splitlines() if re.match(r"^\d+ ", l)]
    eq(len(thr), 1, "threads:\n" + r.stdout)
    eq(thr[0][4:6], ["0", "0"], "the thread's allocs/s and frees/s at the end:\n" + r.stdout)
    r = t.run([t.heaptrail, "live", "--batch", "--at", "2.5s", "b.ht"], check_rc=0)
    a, f = rates_of(r.stdout, "--at 2.5s")
    check(652 <= a <= 746 and 652 <= f <= 746,
          "rates at 2.5s: %g allocations/s, %g frees/s (700 calls each in the second before)"
          % (a, f))


# A thread that makes no heap call (it blocks for ever), then one started
# after it that allocates 5 blocks.
IDLETHR_C = r"""
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
static void *volatile k;
static void *idle(void *x)
{
	for (;;)
		pause();
	return x;
}
static void *alloc5(void *x)
{
	for (int i = 0; i < 5; i++)
		k = malloc(200);
	return x;
}
int main(void)
{
	pthread_t t, u;
	pthread_create(&t, 0, idle, 0);
	usleep(10000);
	pthread_create(&u, 0, alloc5, 0);
	pthread_join(u, 0);
	return 0;
}
"""


@case(timeout=60, labels=("live",))
def test_live_idle_thread_tid(t):
    """The threads view names a thread that made no heap call by its tid
    (stats lists it), not 0, when a thread started after it made some."""
    exe = compile_c(t, "idlethr", IDLETHR_C, ("-pthread",))
    t.run([t.heaptrail, "record", "-q", "-o", t.path("i.ht"), "--", exe], check_rc=0)
    tids = [th["tid"] for th in t.stats(t.path("i.ht"))["per_thread"]]
    eq(len(tids), 3, "stats' threads")
    r = t.run([t.heaptrail, "live", "--batch", "--keys", "t", "i.ht"], check_rc=0)
    thr = [l.split() for l in r.stdout.splitlines() if re.match(r"^\d+ ", l)]
    eq(sorted(int(x[0]) for x in thr), sorted(tids), "the threads view's tids:\n" + r.stdout)
    idle = next(x for x in thr if int(x[0]) == tids[1])
    eq(idle[1:], ["0", "B", "0", "0", "0", "0", "0", "0"], "the idle thread's row")


@case(timeout=60, labels=("live",))
def test_live_at_past_end(t):
    """--at past the end of a finished trace: a note says when it ends (as
    leaks --at), and the screen is the end's, its time the trace's end,
    not "1m40s (cursor)" with nothing said."""
    t.run([t.heaptrail, "record", "-q", "-o", t.path("g.ht"), "--", t.prog("grower"), "1"],
          check_rc=0)
    end = t.stats(t.path("g.ht"))["duration_ns"]
    r = t.run([t.heaptrail, "live", "--batch", "--at", "100s", "g.ht"], check_rc=0)
    eq(r.heaptrail_lines()[0], "heaptrail: note: --at 100.000 s is after the end of g.ht "
       "(%.3f s): the screen at its end" % (end / 1e9), "the note")
    eq(r.stdout.splitlines()[1].split("  ")[0], "time %.1fs" % (end / 1e9), "the time shown")
    whole = t.run([t.heaptrail, "live", "--batch", "g.ht"], check_rc=0)
    eq(r.stdout, whole.stdout, "the screen at --at 100s and at the end")


@case(timeout=60, labels=("live",))
def test_live_snapshot_dir_and_wording(t):
    """--snapshot-dir that is not a directory is refused at the start, exit
    2 (before: --batch --keys w exited 0, the snapshot not written); a
    snapshot of a finished trace says "live at the end of the trace" (at a
    cursor, "live at 1.5s"), not "live now"."""
    t.run([t.heaptrail, "record", "-q", "-o", t.path("g.ht"), "--", t.prog("grower"), "1"],
          check_rc=0)
    r = t.run([t.heaptrail, "live", "--batch", "--keys", "w", "--snapshot-dir",
               t.path("no-such-dir"), "g.ht"])
    eq((r.rc, r.heaptrail_lines()), (2, ["heaptrail: error: live: --snapshot-dir %s: No such "
                                         "file or directory" % t.path("no-such-dir")]),
       "--snapshot-dir missing")
    os.mkdir(t.path("snaps"))
    for args, want in (([], "; live at the end of the trace"), (["--at", "500ms"], "; live at 0.5s")):
        r = t.run([t.heaptrail, "live", "--batch", "--keys", "w", "--snapshot-dir",
                   t.path("snaps")] + args + ["g.ht"], check_rc=0)
        m = re.search(r"snapshot written to (\S+)", r.stdout)
        check(m, "no snapshot:\n" + r.stdout)
        with open(m.group(1)) as f:
            first = f.readline().rstrip("\n")
        check(first.endswith(want), "the snapshot's first line (%s): %r" % (args, first))


def pid_of_cmdline(*words):
    """The pid whose command line holds every word, or None."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        if all(w in argv for w in words):
            return int(d)
    return None


@case(timeout=120, labels=("live",))
def test_live_record_sigterm(t):
    """SIGTERM to record --live (kill, a service manager, timeout): record
    passes it on to the program, the display ends by itself, and record
    exits 128+15 once the trace is finished, as without --live
    (docs/record.md).  Before, the display stayed up, the program a zombie,
    until q."""
    out = t.path("term.ht")
    term = Term(t, "%s record --live --stacks -o %s -- %s 60; echo RECORD-EXIT=$?" % (
        t.heaptrail, out, t.prog("grower")))
    try:
        term.wait(grow_first, "grow_site first")
        rec = pid_of_cmdline(t.heaptrail, "record", "--live", out)
        check(rec, "record's process not found")
        os.kill(rec, signal.SIGTERM)
        term.wait_history("RECORD-EXIT=", 30)
        check("RECORD-EXIT=143" in term.history(), term.history())
    finally:
        term.close()
    s = t.stats(out)
    check(s["closed"], "the trace is closed")
