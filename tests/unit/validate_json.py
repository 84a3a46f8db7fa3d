#!/usr/bin/env python3
"""Validate rxe-verify --json documents against userspace/rxe-verify.schema.json.

Usage: validate_json.py SCHEMA FILE...
       validate_json.py --find DIR SCHEMA
With --find, every *.json file under DIR that is an rxe-verify document (its "tool" is
{"name": "rxe-verify", ...}) is validated, one that does not parse is an error, and
the other JSON files (perftest, the benchmark's own results) are left alone; the count
is printed. The VM runner uses it on what each guest captured.
Exit status: 0 every document is valid, 1 one is not (each error on stderr),
2 usage error or no validator (install python3-jsonschema: tests/host-deps).
"""
import json
import os
import sys

try:
    import jsonschema
except ImportError:
    print("validate_json.py: python3-jsonschema is not installed; run tests/host-deps",
          file=sys.stderr)
    sys.exit(2)


def find_documents(top):
    """rxe-verify documents under top, and files that should have been one."""
    docs, broken = [], []
    for root, _dirs, files in os.walk(top):
        for name in sorted(files):
            if not name.endswith(".json"):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if not text.strip():
                continue  # a command that printed nothing: its own test reports it
            try:
                doc = json.loads(text)
            except json.JSONDecodeError:
                broken.append(path)  # every guest .json is some tool's document
                continue
            tool = doc.get("tool") if isinstance(doc, dict) else None
            if isinstance(tool, dict) and tool.get("name") == "rxe-verify":
                docs.append(path)
    return sorted(docs), sorted(broken)


def main(argv):
    if len(argv) == 4 and argv[1] == "--find":
        docs, broken = find_documents(argv[2])
        for path in broken:
            print(f"{path}: not JSON (a truncated document?)",
                  file=sys.stderr)
        rc = main([argv[0], argv[3]] + docs) if docs else 0
        print(f"{len(docs)} rxe-verify documents checked, {len(broken)} unparsable")
        return 1 if broken else rc
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    bad = 0
    for path in argv[2:]:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        # oneOf over the commands hides the reason: validate against the command's branch
        cmd = doc.get("command") if isinstance(doc, dict) else None
        branch = schema["definitions"].get(cmd) if isinstance(cmd, str) else None
        target = validator if branch is None else jsonschema.Draft7Validator(
            dict(branch, definitions=schema["definitions"]))
        errors = sorted(target.iter_errors(doc), key=lambda e: list(e.path))
        if not errors and branch is not None:
            errors = list(validator.iter_errors(doc))  # and the whole schema too
        for e in errors:
            where = "/".join(str(p) for p in e.path) or "(document)"
            print(f"{path}: {where}: {e.message}", file=sys.stderr)
        bad += bool(errors)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
