"""A CSV aggregation answered as JSON: sum and count of one column grouped by another. The body
is decoded once, from shared memory (str(body, 'utf-8') reads the memoryview in place)."""
import csv
import io
import json

import lagless


def aggregate(body, request):
    """POST /report?by=COLUMN&sum=COLUMN with a CSV body whose first line names the columns."""
    by, col = request.query.get("by"), request.query.get("sum")
    if not by or not col:
        raise lagless.BadRequest("give ?by=COLUMN&sum=COLUMN")
    try:
        rows = csv.DictReader(io.StringIO(str(body, "utf-8")))
        groups = {}
        for row in rows:
            g = groups.setdefault(row[by], [0, 0.0])
            g[0] += 1
            g[1] += float(row[col])
    except UnicodeDecodeError:
        raise lagless.BadRequest("the CSV must be UTF-8")
    except KeyError as e:
        raise lagless.BadRequest("no column %s" % e)
    except ValueError as e:
        raise lagless.BadRequest("column %s: %s" % (col, e))
    out = {k: {"count": n, "sum": round(s, 6)} for k, (n, s) in sorted(groups.items())}
    return (200, "application/json", json.dumps({"by": by, "sum": col, "groups": out}))


def summarise(body, request):
    """POST /summary with a JSON array of numbers: count, sum, min, max, mean."""
    try:
        xs = json.loads(str(body, "utf-8"))
    except ValueError as e:
        raise lagless.BadRequest("not JSON: %s" % e)
    if not isinstance(xs, list) or not xs or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs):
        raise lagless.BadRequest("give a non-empty JSON array of numbers")
    return (200, "application/json", json.dumps(
        {"count": len(xs), "sum": sum(xs), "min": min(xs), "max": max(xs),
         "mean": sum(xs) / len(xs)}))
