#!/usr/bin/env python3
"""The gateway test's model "qwen3-bos" (meson, at configure time): Qwen3's tokenizer files with
a post_processor that adds one special token before every sequence, as Llama-2- and Mistral-style
tokenizers add their BOS (huggingface tokenizers' TemplateProcessing), so a completion's prompt
must start with it (docs/gateway.md "Bodies").

  bos_model.py QWEN3_MODEL_DIR OUT_DIR
"""
import json
import os
import shutil
import sys

BOS, BOS_ID = "<|endoftext|>", 151643


def main(src, out):
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    tok["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {BOS: {"id": BOS, "ids": [BOS_ID], "tokens": [BOS]}},
    }
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    shutil.copyfile(os.path.join(src, "tokenizer_config.json"), os.path.join(out, "tokenizer_config.json"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
