"""The servers ``benchmarks/load.py`` runs as their own processes (``python -c SCRIPT``):
a minimal streaming upstream, and the floor of a Python proxy on the product's stack."""

#: A minimal OpenAI-compatible streaming upstream (raw ASGI under uvicorn): reads the body,
#: then streams ``chunks`` chat.completion.chunk events ``interval`` seconds apart and
#: ``[DONE]``; ``GET /v1/models`` answers for readiness.
UPSTREAM_MAIN = r"""
import asyncio, json, sys
import uvicorn

HOST, PORT, CHUNKS, INTERVAL = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])

def event(delta, finish=None):
    chunk = {"id": "chatcmpl-load", "object": "chat.completion.chunk", "created": 0,
             "model": "load", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"

FIRST = event({"role": "assistant", "content": ""})
TOKEN = event({"content": "tok "})
LAST = event({}, "stop") + b"data: [DONE]\n\n"
MODELS = json.dumps({"object": "list", "data": [{"id": "load", "object": "model"}]}).encode()

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        more = message.get("more_body", False)
    if scope["method"] == "GET":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": MODELS})
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": FIRST, "more_body": True})
    for _ in range(CHUNKS):
        await asyncio.sleep(INTERVAL)
        await send({"type": "http.response.body", "body": TOKEN, "more_body": True})
    await send({"type": "http.response.body", "body": LAST})

uvicorn.run(app, host=HOST, port=PORT, log_level="warning", access_log=False,
            backlog=4096, timeout_keep_alive=60)
"""

#: The least a Python proxy on the product's stack does per request (``--floor``): raw ASGI
#: under uvicorn's httptools protocol, the body read and sent upstream by one aiohttp
#: session, the answer relayed chunk by chunk. No routing, middleware, headers or checks.
FLOOR_MAIN = r"""
import sys
import aiohttp, uvicorn

HOST, PORT, UPSTREAM = sys.argv[1], int(sys.argv[2]), sys.argv[3]
session = None

async def app(scope, receive, send):
    global session
    if scope["type"] != "http":
        return
    if session is None:
        session = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())
    body, more = b"", True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        more = message.get("more_body", False)
    async with session.request(scope["method"], UPSTREAM + scope["path"], data=body,
                               headers={"content-type": "application/json"}) as response:
        await send({"type": "http.response.start", "status": response.status,
                    "headers": [(b"content-type", response.headers.get("content-type", "").encode())]})
        async for chunk in response.content.iter_any():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b""})

uvicorn.run(app, host=HOST, port=PORT, log_level="warning", access_log=False, http="httptools",
            backlog=4096, timeout_keep_alive=60)
"""
