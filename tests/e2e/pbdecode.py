"""A strict decoder of gzipped pprof profiles (profile.proto) written from
the protobuf wire format, so that the export tests never depend on go
alone: varints (at most 10 bytes), length-delimited fields that must fit
in their message, packed or unpacked repeated varints, and the four wire
types a message may hold.  Anything malformed raises ValueError."""

import gzip


def varint(b, i):
    v = shift = 0
    for n in range(10):
        if i >= len(b):
            raise ValueError("varint runs past the end at %d" % i)
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, i
        shift += 7
    raise ValueError("varint longer than 10 bytes at %d" % i)


def fields(b):
    """(field number, wire type, value) of each field of message b."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        field, wt = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0 at %d" % i)
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            if i + 8 > len(b):
                raise ValueError("fixed64 past the end")
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wt == 2:
            n, i = varint(b, i)
            if i + n > len(b):
                raise ValueError("length %d at %d runs past the message (%d bytes)"
                                 % (n, i, len(b)))
            v, i = b[i:i + n], i + n
        elif wt == 5:
            if i + 4 > len(b):
                raise ValueError("fixed32 past the end")
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        else:
            raise ValueError("wire type %d at %d" % (wt, i))
        yield field, wt, v


def ints(wt, v):
    """A repeated varint field's values, packed (wire type 2) or not."""
    if wt == 0:
        return [v]
    if wt != 2:
        raise ValueError("repeated varint with wire type %d" % wt)
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def message(b, spec):
    """Decodes b into a dict: spec maps field number -> (name, kind) with
    kind "int", "ints" (repeated varint), "str", "strs", "msg:SPEC",
    "msgs:SPEC"."""
    out = {}
    for name, kind in spec.values():
        out[name] = [] if kind.endswith("s") or kind.startswith("msgs") else 0
    for f, wt, v in fields(b):
        if f not in spec:
            continue
        name, kind = spec[f]
        if kind == "int":
            if wt != 0:
                raise ValueError("%s: wire type %d" % (name, wt))
            out[name] = signed(v)
        elif kind == "ints":
            out[name] += [signed(x) for x in ints(wt, v)]
        elif kind == "strs":
            out[name].append(v.decode("utf-8"))
        elif kind.startswith("msgs:"):
            out[name].append(message(v, SPECS[kind[5:]]))
        elif kind.startswith("msg:"):
            out[name] = message(v, SPECS[kind[4:]])
    return out


SPECS = {
    "Profile": {1: ("sample_type", "msgs:ValueType"), 2: ("sample", "msgs:Sample"),
                3: ("mapping", "msgs:Mapping"), 4: ("location", "msgs:Location"),
                5: ("function", "msgs:Function"), 6: ("string_table", "strs"),
                7: ("drop_frames", "int"), 8: ("keep_frames", "int"),
                9: ("time_nanos", "int"), 10: ("duration_nanos", "int"),
                11: ("period_type", "msg:ValueType"), 12: ("period", "int"),
                13: ("comment", "ints"), 14: ("default_sample_type", "int")},
    "ValueType": {1: ("type", "int"), 2: ("unit", "int")},
    "Sample": {1: ("location_id", "ints"), 2: ("value", "ints"), 3: ("label", "msgs:Label")},
    "Label": {1: ("key", "int"), 2: ("str", "int"), 3: ("num", "int"), 4: ("num_unit", "int")},
    "Mapping": {1: ("id", "int"), 2: ("memory_start", "int"), 3: ("memory_limit", "int"),
                4: ("file_offset", "int"), 5: ("filename", "int"), 6: ("build_id", "int"),
                7: ("has_functions", "int"), 8: ("has_filenames", "int"),
                9: ("has_line_numbers", "int"), 10: ("has_inline_frames", "int")},
    "Location": {1: ("id", "int"), 2: ("mapping_id", "int"), 3: ("address", "int"),
                 4: ("line", "msgs:Line"), 5: ("is_folded", "int")},
    "Line": {1: ("function_id", "int"), 2: ("line", "int")},
    "Function": {1: ("id", "int"), 2: ("name", "int"), 3: ("system_name", "int"),
                 4: ("filename", "int"), 5: ("start_line", "int")},
}


class Profile:
    """A decoded profile with its references resolved and checked."""

    def __init__(self, data):
        if data[:2] != b"\x1f\x8b":
            raise ValueError("not gzip (starts with %r)" % data[:2])
        p = message(gzip.decompress(data), SPECS["Profile"])
        self.raw = p
        st = p["string_table"]
        if not st or st[0] != "":
            raise ValueError("string_table[0] must be \"\"")
        self.strings = st

        def s(i):
            if not 0 <= i < len(st):
                raise ValueError("string index %d out of range (%d)" % (i, len(st)))
            return st[i]
        self.s = s
        self.types = [(s(v["type"]), s(v["unit"])) for v in p["sample_type"]]
        self.default_type = s(p["default_sample_type"])
        self.period_type = (s(p["period_type"]["type"]), s(p["period_type"]["unit"])) \
            if p["period_type"] else None
        self.comments = [s(c) for c in p["comment"]]
        self.functions = {}
        for f in p["function"]:
            if not f["id"] or f["id"] in self.functions:
                raise ValueError("function id %d repeated or 0" % f["id"])
            self.functions[f["id"]] = (s(f["name"]), s(f["filename"]))
        self.mappings = {}
        for m in p["mapping"]:
            if not m["id"] or m["id"] in self.mappings:
                raise ValueError("mapping id %d repeated or 0" % m["id"])
            self.mappings[m["id"]] = dict(m, filename=s(m["filename"]),
                                          build_id=s(m["build_id"]))
        self.locations = {}
        for loc in p["location"]:
            if not loc["id"] or loc["id"] in self.locations:
                raise ValueError("location id %d repeated or 0" % loc["id"])
            if loc["mapping_id"] and loc["mapping_id"] not in self.mappings:
                raise ValueError("location %d: no mapping %d" % (loc["id"], loc["mapping_id"]))
            lines = []
            for ln in loc["line"]:
                if ln["function_id"] not in self.functions:
                    raise ValueError("location %d: no function %d"
                                     % (loc["id"], ln["function_id"]))
                name, file = self.functions[ln["function_id"]]
                lines.append((name, file, ln["line"]))
            self.locations[loc["id"]] = dict(loc, lines=lines)
        self.samples = []
        for smp in p["sample"]:
            if len(smp["value"]) != len(self.types):
                raise ValueError("a sample has %d values for %d types"
                                 % (len(smp["value"]), len(self.types)))
            for lid in smp["location_id"]:
                if lid not in self.locations:
                    raise ValueError("a sample names location %d, which is not there" % lid)
            self.samples.append((smp["location_id"], smp["value"]))

    def frames(self, sample):
        """(function, file, line) of a sample, innermost first, inlined
        frames expanded."""
        out = []
        for lid in sample[0]:
            out += self.locations[lid]["lines"]
        return out

    def total(self, type_name):
        i = [t for t, _ in self.types].index(type_name)
        return sum(v[i] for _, v in self.samples)

    def by_leaf(self, type_name):
        """Sum of a sample type by the innermost function of each sample."""
        i = [t for t, _ in self.types].index(type_name)
        out = {}
        for smp in self.samples:
            fr = self.frames(smp)
            leaf = fr[0][0] if fr else None
            out[leaf] = out.get(leaf, 0) + smp[1][i]
        return out
