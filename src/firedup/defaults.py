"""firedup's deadlines and defaults, each written once (docs/contract.md,
"Deadlines and defaults", lists them for users). The command line, the Python
API, the live loop and the judge all take theirs from here."""

STALL = 300.0  # seconds without progress evidence before "stalled" (--stall)
GRACE = 30.0  # a traceback while the process lives: how long it has to exit or go on (--grace)
STOP_GRACE = 15.0  # stopping a server: seconds between SIGTERM and SIGKILL (firedup stop --grace)
# A log watched alone: silence after an exception that makes it failed (--quiet). Long
# enough for the rest of a dying server's output (worker tracebacks, the
# parent's "Engine core initialization failed", shutdown lines), which all
# comes within milliseconds; short beside the 5 s of the grep loop it
# replaces. A later calm line disarms it.
QUIET = 2.0
# Quiet after which an open traceback closes and held lines are read.
IDLE = 0.5
# Without a health probe, how long uvicorn's "startup complete" (printed before
# the bind) waits for a bind error; a fatal line naming no cause waits as long
# for the lines that name it.
SETTLE = 0.5
CONFIRM = 2.0  # with a health probe, how long a ready line waits for the port to answer
