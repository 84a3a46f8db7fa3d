"""benchsummary: the figures RESULTS.md is rendered from, without the raw samples.

results.json (render collect) holds every sample of a bench run: tens of thousands of
lines, kept in the run's results directory. The summary is the part of it that the
page reads: summarize() renders the page over a view of the results that records every
key and list it is asked for, keeps exactly those, and checks that the page rendered
from the summary is the page rendered from the results. dumps() writes it compactly:
an object or list that fits in a line is one line, the items of a longer one fill lines.

summarize(res, notes_path) -> summary dict (or raises ValueError)
dumps(summary) -> text
is_summary(doc) -> bool
"""
import json

import benchplot
import benchtable

KIND = "summary"
WIDTH = 160


class _Seen:
    """The paths read: tuples of keys, '*' for any item of a list, '#' for its length."""

    def __init__(self):
        self.paths = set()


class _Dict(dict):
    def __init__(self, d, path, seen):
        super().__init__({k: _wrap(v, path + (k,), seen) for k, v in d.items()})
        self._path, self._seen = path, seen

    def _saw(self, k):
        self._seen.paths.add(self._path + (k,))

    def __getitem__(self, k):
        self._saw(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self._saw(k)
        return super().get(k, default)

    def __contains__(self, k):
        self._saw(k)
        return super().__contains__(k)

    def __iter__(self):
        for k in super().keys():
            self._saw(k)
        return super().__iter__()

    def keys(self):
        for k in super().keys():
            self._saw(k)
        return super().keys()

    def items(self):
        self.keys()
        return super().items()

    def values(self):
        self.keys()
        return super().values()


class _List(list):
    def __init__(self, seq, path, seen):
        super().__init__([_wrap(v, path + ("*",), seen) for v in seq])
        self._path, self._seen = path, seen

    def _saw(self):
        self._seen.paths.add(self._path + ("*",))

    def __iter__(self):
        self._saw()
        return super().__iter__()

    def __getitem__(self, i):
        self._saw()
        return super().__getitem__(i)

    def __len__(self):
        self._seen.paths.add(self._path + ("#",))
        return super().__len__()


def _wrap(v, path, seen):
    if isinstance(v, dict):
        return _Dict(v, path, seen)
    if isinstance(v, list):
        return _List(v, path, seen)
    return v


def _prune(v, path, paths):
    if isinstance(v, dict):
        return {k: _prune(x, path + (k,), paths) for k, x in v.items() if path + (k,) in paths}
    if isinstance(v, list):
        # items read: each pruned alike; only its length read (a count, a test for
        # emptiness): kept whole; neither (raw samples passed over): left empty
        if path + ("*",) in paths:
            return [_prune(x, path + ("*",), paths) for x in v]
        return v if path + ("#",) in paths else []
    return v


def is_summary(doc):
    return isinstance(doc, dict) and doc.get("kind") == KIND


def summarize(res, notes_path):
    # every plot as present: the page then reads everything it could show
    plots = {name: name for name in benchplot.NAMES}
    seen = _Seen()
    full = benchtable.markdown(_wrap(res, (), seen), plots, notes_path)
    paths = set()
    for p in seen.paths:
        # a key read under one item of a list is kept under all of them
        for i in range(1, len(p) + 1):
            paths.add(p[:i])
    summary = _prune(res, (), paths)
    summary = {"schema_version": res.get("schema_version"), "kind": KIND,
               **{k: v for k, v in summary.items() if k != "schema_version"}}
    if benchtable.markdown(json.loads(json.dumps(summary)), plots, notes_path) != full:
        raise ValueError("the page rendered from the summary differs from the page rendered from the results "
                         "(benchtable reads the results in a way benchsummary does not record)")
    return summary


def _fill(parts, pad):
    """Items that fit on one line fill lines of WIDTH; an item of several lines stands alone."""
    lines, cur = [], ""
    for part in parts:
        if "\n" in part:
            if cur:
                lines.append(cur)
                cur = ""
            lines.append(pad + part)
            continue
        if cur and len(cur) + 2 + len(part) > WIDTH:
            lines.append(cur)
            cur = ""
        cur = f"{cur}, {part}" if cur else pad + part
    if cur:
        lines.append(cur)
    return ",\n".join(lines)


def _dump(v, ind):
    one = json.dumps(v, ensure_ascii=False, separators=(", ", ": "))
    if not isinstance(v, (dict, list)) or len(one) + ind <= WIDTH:
        return one
    pad = " " * (ind + 1)
    if isinstance(v, dict):
        return "{\n" + _fill((f"{json.dumps(k, ensure_ascii=False)}: {_dump(x, ind + 1)}" for k, x in v.items()), pad) + \
            "\n" + " " * ind + "}"
    return "[\n" + _fill((_dump(x, ind + 1) for x in v), pad) + "\n" + " " * ind + "]"


def dumps(summary):
    return _dump(summary, 0) + "\n"
