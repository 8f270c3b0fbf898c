// The peer of bench_tokenizer: npm gpt-3-encoder's Encoder.js and bert-tokenizer's BertTokenizer
// on the same text, as JSON lines (MB/s of UTF-8 input; first pass and best of the next ones).
// Both get the text line by line ("per_line": true): on a whole book Encoder.js's array concat per
// piece is quadratic (minutes), and BertTokenizer's one String.fromCodePoint call overflows the stack.
// Usage: node tokenizer_peer.js [TEXT] [REPEAT] [GPT2_DIR] [BERT_DIR]
const fs = require('fs');
const path = require('path');
const [textPath = 'data/moby-dick/data.txt', repeatArg = '5', gpt2Dir = 'data/gpt2', bertDir = 'data/bert'] =
  process.argv.slice(2);
const text = fs.readFileSync(textPath, 'utf-8');
const bytes = Buffer.byteLength(text, 'utf-8');
const repeat = Math.max(1, parseInt(repeatArg, 10));
const { encode } = require(path.resolve(gpt2Dir, 'Encoder.js'));
const { BertTokenizer } = require(path.resolve(bertDir, 'index.js'));
const bert = new BertTokenizer(path.resolve(bertDir, 'vocab.json'), true);
const lines = text.split('\n');
const runs = {
  gpt2: () => lines.reduce((n, l) => n + encode(l).length, 0),
  bert: () => lines.reduce((n, l) => n + bert.tokenize(l).length, 0),
};
for (const [name, run] of Object.entries(runs)) {
  let first = 0, best = Infinity, tokens = 0;
  for (let r = 0; r <= repeat; ++r) {
    const t0 = process.hrtime.bigint();
    tokens = run();
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    if (r === 0) first = s; else best = Math.min(best, s);
  }
  console.log(JSON.stringify({ bench: 'tokenizer', tokenizer: name, impl: 'js', text: textPath, bytes, tokens,
    first_mb_per_s: bytes / 1e6 / first, mb_per_s: bytes / 1e6 / best, repeat, per_line: true }));
}
