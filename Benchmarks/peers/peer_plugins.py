"""Workload 5 for the Python peer: what one handler ("plugin") call costs.

    python peer_plugins.py [--iterations N]

Prints one JSON line: a no-op handler called directly (call_ns), called
after decoding the payload the way the Swift SDK's trampoline does
(decode_call_ns), and a dispatch loop over three handlers (dispatch_ns), in
ns per call, best of three runs.
"""

import json
import sys
import time

MAGIX = 8
loads = json.loads


def main(options):
    """Workload 5 for the peer: a no-op handler called directly, and called
    after decoding the payload (what the Swift SDK's trampoline does)."""
    payload = '{"room":"room-1","from":12,"event":"bench","payload":{"t":123456789012345}}'
    message = loads(payload)

    def noop(kind, room, message):
        pass

    handlers = [noop, noop, noop]
    iterations = int(options.get("iterations", 2_000_000))

    def best_of_three(body, n):
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter_ns()
            body(n)
            best = min(best, (time.perf_counter_ns() - start) / n)
        return best

    def direct(n):
        for _ in range(n):
            noop(MAGIX, "room-1", message)

    def decoded(n):
        for _ in range(n):
            noop(MAGIX, "room-1", loads(payload))

    def dispatch(n):
        for _ in range(n // 3):
            for handler in handlers:
                handler(MAGIX, "room-1", message)

    print(json.dumps({"call_ns": best_of_three(direct, iterations), "decode_call_ns": best_of_three(decoded, iterations // 10),
          "dispatch_ns": best_of_three(dispatch, iterations)}), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    main({args[i][2:]: args[i + 1] for i in range(0, len(args) - 1, 2) if args[i].startswith("--")})
