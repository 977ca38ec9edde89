#!/usr/bin/env python3
"""The OpenEnv-style episode loop of test_openenv.sh, as a user writes it with the Python SDK:
a sandbox from the environment image with ports=[8000] and its entrypoint, wait_for_port, then
/reset and /step through get_host(8000) with urllib (over TCP, with the daemon's token), the
same episode through libsbx (sb.port_request), and three at once through AsyncSandbox. Prints one line per check; exits 1 on a miss.

openenv_episode.py IMAGE TOKEN
"""
import json
import sys
import urllib.request

import sandboxd

IMAGE, TOKEN = sys.argv[1], sys.argv[2]


def post(url, obj):
    req = urllib.request.Request(url, data=json.dumps(obj).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def get(url):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def episode(reset, step, actions):
    obs = reset()["observation"]
    rewards, done = [], False
    for a in actions:
        out = step({"message": a})
        rewards.append(out["reward"])
        obs, done = out["observation"], out["done"]
        if done:
            break
    return obs, rewards, done


with sandboxd.Sandbox.create(image=IMAGE, ports=[8000], network=sandboxd.Egress.none(),
                             entrypoint=["python3", "/srv/env.py", "8000"]) as sb:
    sb.wait_for_port(8000, timeout="20s")
    base = sb.get_host(8000)
    obs, rewards, done = episode(lambda: post(base + "reset", {}),
                                 lambda a: post(base + "step", {"action": a}),
                                 ["blue", "green", "it is red"])
    assert rewards == [0.0, 0.0, 1.0] and done, (rewards, done, obs)
    st = get(base + "state")
    assert st["step_count"] == 3 and st["solved"] and st["actions"][-1] == "it is red", st
    print("urllib episode ok", rewards)

    def lib_post(path, obj):
        code, body = sb.port_request(8000, "POST", path, json.dumps(obj).encode())
        assert code == 200, (code, body)
        return json.loads(body)
    obs, rewards, done = episode(lambda: lib_post("/reset", {}),
                                 lambda a: lib_post("/step", {"action": a}), ["a", "b", "c", "d"])
    assert rewards == [0.0, 0.0, 0.0] and done, (rewards, done)  # ends after 3 turns
    code, body = sb.port_request(8000, "POST", "/step", b'{"action":{"message":"late"}}')
    assert code == 400 and b"episode is done" in body, (code, body)  # the server's own 400
    print("libsbx episode ok", rewards)

import asyncio  # noqa: E402  the same through AsyncSandbox, several environments at once


async def async_episodes(n):
    async def one(i):
        sb = await sandboxd.AsyncSandbox.create(image=IMAGE, ports=[8000],
                                                entrypoint=["python3", "/srv/env.py", "8000"])
        try:
            await sb.wait_for_port(8000, timeout="20s")
            await sb.port_request(8000, "POST", "/reset", b"{}")
            code, body = await sb.port_request(8000, "POST", "/step",
                                               json.dumps({"action": {"message": f"red {i}"}}).encode())
            return code, json.loads(body)["reward"]
        finally:
            await sb.terminate()
    return await asyncio.gather(*(one(i) for i in range(n)))

res = asyncio.run(async_episodes(3))
assert res == [(200, 1.0)] * 3, res
print("async episodes ok", len(res))
