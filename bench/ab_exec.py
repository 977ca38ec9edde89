# bench/ab_exec.py: the exec round trip of two daemons interleaved request by request (old, new,
# new, old, ...), so both see the same load. Usage: ab_exec.py OLD_SOCK NEW_SOCK N. Standard library only.
import http.client, socket, json, time, sys, statistics
class UC(http.client.HTTPConnection):
    def __init__(s, path): super().__init__('localhost'); s.path=path
    def connect(s):
        s.sock=socket.socket(socket.AF_UNIX); s.sock.connect(s.path)
cs=[UC(p) for p in sys.argv[1:3]]; N=int(sys.argv[3])
def req(c,m,p,b=None):
    c.request(m,p,body=b,headers={'Content-Type':'application/json'} if b else {})
    r=c.getresponse(); return r.status,r.read()
ids=[json.loads(req(c,'POST','/v1/sandboxes','{}')[1])['id'] for c in cs]
t=[[],[]]
for i in range(N):
    for k in ((0,1) if i%2==0 else (1,0)):
        a=time.monotonic(); st,d=req(cs[k],'POST','/v1/sandboxes/%s/exec'%ids[k],'{"argv":["true"]}'); t[k].append((time.monotonic()-a)*1e3)
        assert st==200,(st,d)
for k in (0,1): req(cs[k],'DELETE','/v1/sandboxes/'+ids[k])
o,n=statistics.median(t[0]),statistics.median(t[1])
print('exec round trip p50: old %.3f ms, new %.3f ms, new/old %.2f (n=%d, interleaved)'%(o,n,n/o,N))
