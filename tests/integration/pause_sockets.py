#!/usr/bin/env python3
# Run inside a pausable sandbox by tests/integration/test_pause.sh `pause_sockets`: network state
# a pause must carry. A TCP connection over loopback with both ends here and a UDP pair: every
# 50 ms the client sends a counter kept in this process's memory over both, and reader threads
# write what they last received to /tmp/tcp and /tmp/udp (the counter itself: /tmp/count). The
# listening socket on 127.0.0.1:PORT also answers the daemon's port proxy: an HTTP request gets
# "hello"; a WebSocket upgrade gets a 101 and its bytes echoed, and /tmp/ws says "open", then
# "closed" once the connection ends. Errors go to stderr.
import base64, hashlib, os, re, socket, sys, threading, time

PORT = int(sys.argv[1])


def put(name, v):
    with open(f"/tmp/{name}.new", "w") as f:
        f.write(str(v))
    os.rename(f"/tmp/{name}.new", f"/tmp/{name}")


def tcp_reader(conn):
    buf = b""
    while True:
        d = conn.recv(4096)
        if not d:
            put("tcp", "eof")
            return
        buf += d
        *lines, buf = buf.split(b"\n")
        if lines:
            put("tcp", lines[-1].decode())


def udp_reader(sock):
    while True:
        put("udp", sock.recv(64).decode())


def answer(c):
    head = b""
    while b"\r\n\r\n" not in head:
        d = c.recv(4096)
        if not d:
            c.close()
            return
        head += d
    if b"upgrade: websocket" not in head.lower():
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nhello\n")
        c.close()
        return
    key = re.search(rb"(?i)sec-websocket-key: *(\S+)", head).group(1)
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    put("ws", "open")
    while d := c.recv(4096):
        c.sendall(d)
    put("ws", "closed")
    c.close()


def serve(srv):
    while True:
        c, _ = srv.accept()
        threading.Thread(target=answer, args=(c,), daemon=True).start()


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", PORT))
srv.listen(8)
cli = socket.create_connection(("127.0.0.1", PORT))
conn, _ = srv.accept()
u_in = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u_in.bind(("127.0.0.1", PORT + 1))
u_out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for f, a in ((tcp_reader, conn), (udp_reader, u_in), (serve, srv)):
    threading.Thread(target=f, args=(a,), daemon=True).start()
x = 1000
while True:
    x += 1
    cli.sendall(f"{x}\n".encode())
    u_out.sendto(str(x).encode(), ("127.0.0.1", PORT + 1))
    put("count", x)
    time.sleep(0.05)
