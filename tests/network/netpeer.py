#!/usr/bin/python3
"""Test peer for the network suite (never a test itself).
serve PORT...         accept TCP on [::]:PORT (dual stack) for each PORT; answer
                      "hello <local-addr> <port>\\n" and close. Prints "ready" when listening.
probe HOST PORT [T]   connect with a timeout of T seconds (default 2) and print one line:
                      "ok <ms> <reply>", "refused <ms>", "timeout <ms>" or "error <ms> <errno>".
"""
import errno, selectors, socket, sys, time


def serve(ports):
    sel = selectors.DefaultSelector()
    for p in ports:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind(("::", p))
        s.listen(64)
        sel.register(s, selectors.EVENT_READ)
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            c, _ = key.fileobj.accept()
            local = c.getsockname()
            addr = local[0][7:] if local[0].startswith("::ffff:") else local[0]
            try:
                c.sendall(("hello %s %d\n" % (addr, local[1])).encode())
            except OSError:
                pass
            c.close()


def probe(host, port, t):
    start = time.monotonic()
    ms = lambda: int((time.monotonic() - start) * 1000)
    try:
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(t)
        s.connect((host, port))
        data = s.recv(200).decode().strip()
        print("ok %d %s" % (ms(), data))
    except ConnectionRefusedError:
        print("refused %d" % ms())
    except socket.timeout:
        print("timeout %d" % ms())
    except OSError as e:
        print("error %d %s" % (ms(), errno.errorcode.get(e.errno, e.errno)))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve([int(p) for p in sys.argv[2:]])
    else:
        probe(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]) if len(sys.argv) > 4 else 2.0)
