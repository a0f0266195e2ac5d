// Reference outputs for the prompt_text tests, from the npm packages only
// (nothing is fetched): @huggingface/tokenizers encodes, @huggingface/jinja
// renders the model's chat template.
//
//   node oracle.mjs corpus <model_dir>   → {"cases": [{name, text, ids, prompt, prompt_ids}]}
//   node oracle.mjs render <model_dir> <text_file>  → {"prompt", "prompt_ids"}
//   node oracle.mjs template <model_dir> <case_file> → {"prompt", "prompt_ids", "ids"}
//     (tests/templates: case_file is {"source", "variables", "encode": [texts]}; the
//     source is rendered with the variables alone, "ids" are the texts' tokens)
//   node oracle.mjs encode <model_dir> <text_file>  → {"ids"}: the text with the
//     tokenizer's special tokens (add_special_tokens: true, the post_processor's), as an
//     engine encodes a /v1/completions prompt
//   node oracle.mjs chat <model_dir> <json_file>    → {"prompt", "prompt_ids"}
//     json_file: {"messages": [...], "tools"?: [...], "add_generation_prompt": bool}, the
//     whole conversation rendered as transformers' apply_chat_template does
//
// <model_dir> holds tokenizer.json and tokenizer_config.json. The corpus is
// generated from a fixed seed, so every run produces the same cases.
import fs from "node:fs";
import path from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";

function loadModel(dir) {
  const tj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const tc = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const tokenizer = new Tokenizer(tj, tc);
  const template = new Template(tc.chat_template);
  const special = {};
  for (const key of ["bos_token", "eos_token", "unk_token", "pad_token"]) {
    const v = tc[key];
    if (typeof v === "string") special[key] = v;
    else if (v && typeof v.content === "string") special[key] = v.content;
  }
  const encode = (text) => Array.from(tokenizer.encode(text, { add_special_tokens: false }).ids);
  const encodeSpecial = (text) => Array.from(tokenizer.encode(text, { add_special_tokens: true }).ids);
  const render = (text) =>
    template.render({ messages: [{ role: "user", content: text }], add_generation_prompt: true, ...special });
  const renderChat = (chat) =>
    template.render({
      messages: chat.messages,
      ...(chat.tools ? { tools: chat.tools } : {}),
      add_generation_prompt: chat.add_generation_prompt !== false,
      ...special,
    });
  return { encode, encodeSpecial, render, renderChat };
}

// mulberry32: a small fixed-seed PRNG so the corpus is the same on every run.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  "the of and to in is you that it he was for on are as with his they I at be this have from or one had " +
  "by word but not what all were we when your can said there use an each which she do how their if will up " +
  "other about out many then them these so some her would make like him into time has look two more write go " +
  "see number no way could people my than first water been call who oil its now find long down day did get " +
  "come made may part cache replica prefix tokenizer Kubernetes gRPC HTTP/2 latency throughput GPU's don't " +
  "we'll they're I've she'd it's WE'LL HE'S O'Neil rock'n'roll 2026 3.14159 1,000,000 0x1F 42nd"
).split(" ");

// Pieces the random mixes draw from: every script and class the pre-tokenizer
// treats differently.
const POOL = [
  "a", "Z", "hello", " world", "  ", "   ", "\t", "\n", "\r\n", "\n\n\n", " \n ", "0", "7", "123456",
  "!", "?!", "...", "--", "'s", "'T", "'ll", "'RE", "’s", "(", ")", "{", "}", "[]", "<", ">", "|",
  "<|", "|>", "_", "@", "#", "$", "%", "^", "&&", "*", "+", "=", "/", "\\", "~", "`",
  "中文", "汉字测试", "日本語", "ひらがな", "カタカナ", "한국어", "세계", "Ελληνικά", "русский", "עברית",
  "العربية", "हिन्दी", "ไทย", "Ünïcödé", "café", "cafe\u0301", "n\u0303", "\u1100\u1161", "Å",
  "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇩🇪", "❤️", "🤖", "∑", "√2", "½", "²", "Ⅻ", "٣", "①",
  "\u00a0", "\u2003", "\u3000", "\u2028", "\u200b", "\u180e", "\u0085", "\ufeff", "\u001c", "ſ",
  "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
  "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|reserved_special_token_7|>",
  "<|im_start|", "<|im_star", "< |im_end| >", "<<|im_end|>>", "<|<|eot_id|>|>",
];
// The Llama 3 template trims the message: Jinja2 with Python's str.strip(),
// @huggingface/jinja with JavaScript's trim(). They disagree on U+001C..1F,
// U+0085 (Python only) and U+FEFF (JavaScript only); a text whose ends they
// would trim differently gets an "x" at both ends.
const PY_SPACE = /^[\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$/u;
function pyStrip(s) {
  const cps = Array.from(s);
  let b = 0, e = cps.length;
  while (b < e && PY_SPACE.test(cps[b])) b++;
  while (e > b && PY_SPACE.test(cps[e - 1])) e--;
  return cps.slice(b, e).join("");
}
function edgeSafe(s) {
  return pyStrip(s) === s.trim() ? s : "x" + s + "x";
}

const FIXED = {
  empty_like: " ",
  hello: "Hello world",
  hello_lower: "hello world",
  contractions: "I'm sure you'll see we're done; they've said he'd go. DON'T, WON'T, Y'ALL'D'VE",
  numbers: "Pi is 3.14159265358979 and e is 2.718281828; 1234567890 + 0987654321 = 2222222211",
  cjk: "我们的服务器告诉网关哪个副本已经缓存了前缀。日本語のテキストも大丈夫です。한국어 문장도 있습니다.",
  emoji: "Routing 🚀 works 👍🏽 for families 👨‍👩‍👧‍👦 and flags 🇯🇵🇩🇪 ❤️‍🔥",
  code: "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n    for (auto x : v) { if (x % 2 == 0) return x; }\n    return 0;\n}\n",
  python: "def f(x):\n    '''doc'''\n    return {k: v for k, v in x.items() if v is not None}  # comment\n\n\n",
  whitespace: "   leading and trailing   \n\n\t\t  \r\n    x  y   z    ",
  only_newlines: "\n\n\n\n",
  tabs_spaces: "a\t\t b  \t c   \n\n  d",
  lookalikes: "<|im_start|>user\nhi<|im_end|> <|im_start| <|endoftext|> <think>x</think> <|eot_id|><|begin_of_text|>",
  nfc: "cafe\u0301 re\u0301sume\u0301 \u1100\u1161\u11a8 A\u030a Å \u212b",
  long_word: "a".repeat(5000) + " " + "ab".repeat(3000) + " " + "!".repeat(2000),
  long_space: " ".repeat(3000) + "x" + "\n".repeat(1000) + "y" + "\t ".repeat(500),
  long_digits: "9".repeat(4000),
  long_cjk: "的".repeat(3000) + "一二三四五六七八九十".repeat(200),
  long_emoji: "😀".repeat(1500),
  url_json: 'See https://example.com/a?b=c&d=e#f and {"key": [1, 2.5, true, null], "s": "x\\ny"}',
  long_s: "'ſ 'S 's 'K 'k 'Ll",
};

function randomMix(r, n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const parts = [];
    const count = 1 + Math.floor(r() * 40);
    for (let k = 0; k < count; k++) parts.push(POOL[Math.floor(r() * POOL.length)]);
    out.push(edgeSafe(parts.join("")));
  }
  return out;
}

function englishText(r, bytes) {
  const parts = [];
  let size = 0;
  while (size < bytes) {
    const len = 5 + Math.floor(r() * 20);
    const words = [];
    for (let i = 0; i < len; i++) words.push(WORDS[Math.floor(r() * WORDS.length)]);
    let s = words.join(" ");
    s = s[0].toUpperCase() + s.slice(1) + (r() < 0.1 ? "?" : ".") + (r() < 0.15 ? "\n\n" : " ");
    parts.push(s);
    size += Buffer.byteLength(s);
  }
  return parts.join("").trimEnd();
}

function mixedText(r, bytes) {
  const parts = [];
  let size = 0;
  while (size < bytes) {
    const s = POOL[Math.floor(r() * POOL.length)];
    parts.push(s);
    size += Buffer.byteLength(s);
  }
  return edgeSafe(parts.join(""));
}

export function corpus() {
  const r = rng(20261130);
  const cases = Object.entries(FIXED).map(([name, text]) => ({ name, text }));
  randomMix(r, 400).forEach((text, i) => cases.push({ name: `mix_${i}`, text }));
  cases.push({ name: "english_1mib", text: englishText(r, 1 << 20) });
  cases.push({ name: "mixed_1mib", text: mixedText(r, 1 << 20) });
  return cases;
}

function main() {
  const [mode, dir, file] = process.argv.slice(2);
  const model = loadModel(dir);
  if (mode === "render") {
    const prompt = model.render(fs.readFileSync(file, "utf8"));
    process.stdout.write(JSON.stringify({ prompt, prompt_ids: model.encode(prompt) }));
    return;
  }
  if (mode === "template") {
    const c = JSON.parse(fs.readFileSync(file, "utf8"));
    const prompt = new Template(c.source).render(c.variables);
    const ids = (c.encode || []).map((text) => model.encode(text));
    process.stdout.write(JSON.stringify({ prompt, prompt_ids: model.encode(prompt), ids }));
    return;
  }
  if (mode === "encode") {
    process.stdout.write(JSON.stringify({ ids: model.encodeSpecial(fs.readFileSync(file, "utf8")) }));
    return;
  }
  if (mode === "chat") {
    const prompt = model.renderChat(JSON.parse(fs.readFileSync(file, "utf8")));
    process.stdout.write(JSON.stringify({ prompt, prompt_ids: model.encode(prompt) }));
    return;
  }
  if (mode !== "corpus") {
    throw new Error("usage: oracle.mjs corpus|render|template|encode|chat <model_dir> [file]");
  }
  const cases = corpus().map(({ name, text }) => {
    const prompt = model.render(text);
    return { name, text, ids: model.encode(text), prompt, prompt_ids: model.encode(prompt) };
  });
  process.stdout.write(JSON.stringify({ cases }));
}

main();
