"""Prints mutmut's score from .mutmut-cache and fails below the break threshold (percent killed)."""

import sqlite3
import sys


def main():
    threshold = float(sys.argv[1])
    with sqlite3.connect(".mutmut-cache") as db:
        rows = dict(db.execute("select status, count(*) from Mutant group by status").fetchall())
    killed = rows.get("ok_killed", 0)
    survived = rows.get("bad_survived", 0)
    timeout = rows.get("bad_timeout", 0)
    suspicious = rows.get("ok_suspicious", 0)
    skipped = rows.get("skipped", 0)
    tested = killed + survived + timeout + suspicious
    # A timeout is a mutant the tests stopped (a hang is a failure), as Stryker counts it.
    score = 100.0 * (killed + timeout + suspicious) / tested if tested else 0.0
    print(
        f"mutmut oduflow_job.py: {score:.1f}% killed ({killed} killed, {timeout} timed out, "
        f"{suspicious} suspicious, {survived} survived, {skipped} skipped as message text or out of scope)"
    )
    if score < threshold:
        print(f"mutation score {score:.1f}% is below the break threshold {threshold}%", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
