# tests/network/etcd_freeze_proxy.py LISTEN_PORT UPSTREAM_PORT: a TCP relay on 127.0.0.1 in front
# of etcd that can make a watch stream go silent without closing it (a half-dead connection, as a
# stuck proxy or a lost NAT entry leaves it). On SIGUSR1 every connection open at that moment
# whose client has sent a `/v3/watch` request stops getting etcd's bytes (they are read and
# dropped); its socket stays open. Connections made later are relayed as before. Prints
# "frozen N" on stderr for each SIGUSR1. On SIGUSR2 the next `/v3/kv/put` request is answered
# 503 here (not relayed) and its connection closed: an etcd call that fails once; prints "armed"
# and then "failed a put". On SIGHUP etcd goes away for the daemons and, on the next SIGHUP, comes
# back: every connection open is closed and those made meanwhile are closed at once, unrelayed (an
# etcd call fails at once, as with etcd stopped, while etcd itself runs on and expires leases on
# its clock); prints "down N" (the connections closed) and then "up". On SIGWINCH etcd stops
# answering and, on the next SIGWINCH, answers again on new connections only: every connection
# open at the first, and those made until the second, go dead for good (kept open, their bytes
# read and dropped both ways: etcd never sees their requests), as when a relay or a NAT in
# between loses its connections; prints "stalled N" (the connections open) and then "unstalled".
# On SIGALRM watches are refused and, on the next SIGALRM, allowed again: every open connection
# whose client sent a `/v3/watch` request is closed, and each `/v3/watch` request meanwhile is
# answered 503 and its connection closed (the other calls go through); prints "watches refused N"
# and then "watches allowed". Standard library only.
import selectors
import signal
import socket
import sys

LISTEN, UP = int(sys.argv[1]), int(sys.argv[2])
sel = selectors.DefaultSelector()
pairs = {}  # socket -> its peer
state = {}  # client socket -> {"watch": bool, "frozen": bool, "dead": bool}
fail_puts = [0]  # puts still to fail (SIGUSR2)
down = [False]  # etcd unreachable through the relay (SIGHUP toggles)
toggles = [0]  # SIGHUPs not yet acted on (the loop closes the connections, not the handler)
stalled = [False]  # new connections go dead (SIGWINCH toggles)
no_watch = [False]  # watch requests refused (SIGALRM toggles)
wtoggles = [0]  # SIGALRMs not yet acted on


def freeze(*_):
    n = 0
    for c, st in state.items():
        if st["watch"] and not st["frozen"]:
            st["frozen"] = True
            n += 1
    print("frozen %d" % n, file=sys.stderr, flush=True)


def arm(*_):
    fail_puts[0] += 1
    print("armed", file=sys.stderr, flush=True)


def hup(*_):
    toggles[0] += 1


def stall(*_):
    stalled[0] = not stalled[0]
    if not stalled[0]:
        print("unstalled", file=sys.stderr, flush=True)
        return
    for st in state.values():
        st["dead"] = True
    print("stalled %d" % len(state), file=sys.stderr, flush=True)


def alarm(*_):
    wtoggles[0] += 1


def refuse_watches():
    no_watch[0] = not no_watch[0]
    if not no_watch[0]:
        print("watches allowed", file=sys.stderr, flush=True)
        return
    watches = [c for c, st in state.items() if st["watch"]]
    for c in watches:
        close(c)
    print("watches refused %d" % len(watches), file=sys.stderr, flush=True)


def outage():
    down[0] = not down[0]
    if not down[0]:
        print("up", file=sys.stderr, flush=True)
        return
    clients = list(state)
    for c in clients:
        close(c)
    print("down %d" % len(clients), file=sys.stderr, flush=True)


def close(s):
    for x in (s, pairs.get(s)):
        if x is None or x not in pairs:
            continue
        sel.unregister(x)
        pairs.pop(x, None)
        state.pop(x, None)
        x.close()


def accept(ls):
    c, _ = ls.accept()
    if down[0]:
        return c.close()
    u = socket.create_connection(("127.0.0.1", UP))
    pairs[c], pairs[u] = u, c
    state[c] = {"watch": False, "frozen": False, "dead": stalled[0]}
    sel.register(c, selectors.EVENT_READ, relay)
    sel.register(u, selectors.EVENT_READ, relay)


def relay(s):
    try:
        data = s.recv(65536)
    except OSError:
        data = b""
    if not data:
        return close(s)
    if s in state:  # from the client
        if state[s]["dead"]:
            return
        if fail_puts[0] and b"/v3/kv/put" in data:
            fail_puts[0] -= 1
            s.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            print("failed a put", file=sys.stderr, flush=True)
            return close(s)
        if b"/v3/watch" in data:
            state[s]["watch"] = True
            if no_watch[0]:
                s.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return close(s)
        pairs[s].sendall(data)
    else:  # from etcd
        c = pairs[s]
        if not state[c]["frozen"] and not state[c]["dead"]:
            c.sendall(data)


signal.signal(signal.SIGUSR1, freeze)
signal.signal(signal.SIGUSR2, arm)
signal.signal(signal.SIGHUP, hup)
signal.signal(signal.SIGWINCH, stall)
signal.signal(signal.SIGALRM, alarm)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", LISTEN))
ls.listen(64)
sel.register(ls, selectors.EVENT_READ, accept)
print("listening", file=sys.stderr, flush=True)
while True:
    for key, _ in sel.select(0.05):
        key.data(key.fileobj)
    while toggles[0]:
        toggles[0] -= 1
        outage()
    while wtoggles[0]:
        wtoggles[0] -= 1
        refuse_watches()
