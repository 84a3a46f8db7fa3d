#!/usr/bin/env python3
"""Validate rxe-verify --json documents against userspace/rxe-verify.schema.json.

Usage: validate_json.py SCHEMA FILE...
Exit status: 0 every FILE is valid, 1 a FILE is not (each error on stderr),
2 usage error or no validator (install python3-jsonschema: tests/host-deps).
"""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("validate_json.py: python3-jsonschema is not installed; run tests/host-deps",
          file=sys.stderr)
    sys.exit(2)


def main(argv):
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
